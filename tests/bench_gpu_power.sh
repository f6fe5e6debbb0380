#!/bin/sh
# kiln bench on the GPU: the table and the CSV carry the board's mean SM clock, power
# and energy per run (NVML) for every configuration. Exits 77 (ctest: skipped) without
# a GPU, or where the driver's NVML library does not answer.
# usage: bench_gpu_power.sh KILN_MAKE_MODEL KILN WORK_DIR
set -u
make_model=$1 kiln=$2 dir=$3
mkdir -p "$dir" && cd "$dir" || exit 1
"$make_model" mlp -o mlp.onnx > /dev/null || exit 1
out=$("$kiln" bench mlp.onnx --device gpu --compare fused,unfused --iterations 2000 --warmup 20 --csv bench.csv 2>&1)
rc=$?
echo "$out"
if [ $rc -ne 0 ]; then
  case "$out" in *"no CUDA GPU"*) echo "skipped: no CUDA GPU"; exit 77 ;; esac
  exit 1
fi
case "$out" in *"no power and clock columns"*) echo "skipped: NVML does not answer here"; exit 77 ;; esac
echo "$out" | grep -q "SM_MHz" || { echo "FAIL: the table has no SM_MHz column"; exit 1; }
awk -F, 'NR == 1 { ok = ($17 == "sm_mhz" && $18 == "watts" && $19 == "mj_per_run"); next }
         { ok = ok && $17 > 0 && $18 > 0 && $19 > 0; rows++ }
         END { exit (ok && rows == 2) ? 0 : 1 }' bench.csv || { echo "FAIL: bench.csv lacks the power columns:"; cat bench.csv; exit 1; }
echo "PASS: SM clock, power and energy per run for both configurations"
