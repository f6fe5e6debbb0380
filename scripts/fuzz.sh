#!/usr/bin/env bash
# Builds kiln's fuzz targets with clang, libFuzzer, AddressSanitizer and
# UndefinedBehaviorSanitizer, seeds their corpora and runs each for SECONDS
# (default 60): docs/fuzzing.md.
#
#   [KILN_FUZZ_JOBS=N] bash scripts/fuzz.sh [SECONDS] [TARGET...]
#
# With KILN_FUZZ_JOBS=N, N libFuzzer workers run each target at once, sharing its
# corpus (N x SECONDS of fuzzing).
# Targets: onnx_import (the importer with ONNX's checker), onnx_import_skipchecker
# (without it), compile (the importer, pass pipeline, memory plan and kernel
# generators: kiln compile short of NVRTC), bundle (Bundle::Load, its validator and
# the CPU backend), tensor_file (the .npy and TensorProto readers). Default: all five,
# one after the other.
# Seeds come from $KILN_ONNX_DATA and $KILN_ZOO_DATA when set (ONNX models and their
# input files) and from bundles compiled here. Corpora grow in build-fuzz/corpus/
# TARGET/; crashes land in build-fuzz/findings/TARGET/ (copy each into
# tests/fuzz/regressions/TARGET/, where the default test run replays it). Each run
# appends a line to build-fuzz/fuzz_log.tsv: date, target, seconds, workers,
# executions (all workers), coverage (the largest of the workers'), findings.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
targets=("$@")
((${#targets[@]})) || targets=(onnx_import onnx_import_skipchecker compile bundle tensor_file)

bash scripts/install_deps.sh
if ! command -v clang++ >/dev/null || ! ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
  echo "kiln: installing clang and its sanitizer runtimes"
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends clang libclang-rt-dev
fi

build=$(realpath -m "${KILN_FUZZ_BUILD_DIR:-build-fuzz}")
CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKILN_BUILD_FUZZERS=ON \
  -DKILN_BUILD_TESTS=OFF > /dev/null
cmake --build "$build" --target onnx_import_fuzzer compile_fuzzer bundle_fuzzer tensor_file_fuzzer kiln kiln_make_model

export ASAN_OPTIONS=detect_leaks=0:protect_shadow_gap=0
export UBSAN_OPTIONS=print_stacktrace=1
corpus=$build/corpus
mkdir -p "$corpus"/{onnx_import,bundle,tensor_file} "$build"/findings

# Seeds, each corpus once: ONNX models and their input files, then bundles of three
# generated models and their manifests.
if [ -z "$(ls -A "$corpus/onnx_import")" ]; then
  for d in "${KILN_ONNX_DATA:-/nonexistent}"/node/*/ "${KILN_ZOO_DATA:-/nonexistent}"/*/; do
    [ -f "$d/model.onnx" ] || continue
    cp "$d/model.onnx" "$corpus/onnx_import/$(basename "$d").onnx"
    for f in "$d"/test_data_set_0/*.pb; do
      if [ -f "$f" ]; then cp "$f" "$corpus/tensor_file/$(basename "$d")_$(basename "$f")"; fi
    done
  done
fi
if [ -z "$(ls -A "$corpus/bundle")" ]; then
  for model in mlp tiny_cnn bert_layer; do
    "$build/models/kiln_make_model" "$model" -o "$build/seed_$model.onnx" > /dev/null
    cp "$build/seed_$model.onnx" "$corpus/onnx_import/"
    if ! KILN_CACHE_DIR="$build/kernel-cache" "$build/tools/kiln" compile "$build/seed_$model.onnx" \
         -o "$corpus/bundle/$model.kiln" > /dev/null; then
      echo "kiln: warning: could not compile the seed bundle '$model'" >&2
      continue
    fi
    # The manifest alone (the target wraps it with a valid checksum).
    python3 - "$corpus/bundle/$model.kiln" "$corpus/bundle/$model.manifest" <<'PY'
import struct, sys
data = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", data[12:20])[0]
open(sys.argv[2], "wb").write(data[20:20 + n])
PY
  done
fi
[ -n "$(ls -A "$corpus/onnx_import")" ] || { echo "kiln: no ONNX seeds: set KILN_ONNX_DATA" >&2; exit 1; }

for t in "${targets[@]}"; do
  case $t in
    onnx_import) bin=onnx_import_fuzzer; dir=onnx_import; env=();;
    onnx_import_skipchecker) bin=onnx_import_fuzzer; dir=onnx_import; env=(KILN_FUZZ_SKIP_ONNX_CHECKER=1);;
    compile) bin=compile_fuzzer; dir=onnx_import; env=();;
    bundle) bin=bundle_fuzzer; dir=bundle; env=();;
    tensor_file) bin=tensor_file_fuzzer; dir=tensor_file; env=();;
    *) echo "kiln: unknown fuzz target '$t'" >&2; exit 2;;
  esac
  mkdir -p "$build/findings/$t" "$corpus/$t.new" "$build/work/$t"
  jobs=${KILN_FUZZ_JOBS:-1}
  parallel=()
  ((jobs > 1)) && parallel=(-jobs="$jobs" -workers="$jobs")
  log=$build/findings/$t/last_run.log
  echo "kiln: fuzzing $t for ${seconds}s with $jobs worker(s)"
  rm -f "$build/work/$t"/fuzz-*.log
  set +e
  (cd "$build/work/$t" && env "${env[@]}" "$build/tests/$bin" "$corpus/$t.new" "$corpus/$dir" \
    -max_total_time="$seconds" -timeout=20 -rss_limit_mb=4096 -max_len=262144 -print_final_stats=1 \
    -artifact_prefix="$build/findings/$t/" "${parallel[@]}") > "$log" 2>&1
  rc=$?
  set -e
  # One worker logs to $log; several each to work/TARGET/fuzz-K.log.
  logs=("$log"); ((jobs > 1)) && logs=("$build/work/$t"/fuzz-*.log)
  execs=$(cat "${logs[@]}" | grep -o 'stat::number_of_executed_units: *[0-9]*' | grep -o '[0-9]*$' |
          awk '{s += $1} END {print s + 0}' || true)
  cov=$(cat "${logs[@]}" | grep -o 'cov: [0-9]*' | grep -o '[0-9]*' | sort -n | tail -1 || true)
  found=$(find "$build/findings/$t" -name 'crash-*' -o -name 'oom-*' -o -name 'timeout-*' | wc -l)
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$(date -u +%FT%TZ)" "$t" "$seconds" "$jobs" "$execs" "${cov:-0}" "$found" \
    >> "$build/fuzz_log.tsv"
  echo "kiln: $t: exit $rc, $execs executions, coverage ${cov:-0}, $found findings so far ($log)"
done
