#!/usr/bin/env bash
# Issue 33's zoo table on the GPU machine: for each NAME:BATCH, export_zoo.py --full
# exports the model at that batch (and --seq tokens for text models), kiln bench times it
# fused and unfused, zoo_torch_bench.py times the same module in PyTorch eager and under
# torch.compile, and zoo_table.py merges the CSVs into benchmarks/RESULTS.md's table.
#
#   benchmarks/run_zoo_benchmarks.sh --export-zoo PATH [--out DIR] [--models "bert:8 vit:1 ..."]
#                                    [--seq N] [--only export|kiln|torch|table]
#
# A model is NAME:BATCH or NAME:BATCH:EXPORTER (legacy or dynamo; default dynamo for
# gpt2, llama and vit, whose dynamo exports RESULTS.md measures, else legacy). Each part
# writes its own file under --out and skips what is already there (an export, a kiln or
# torch CSV), so the table can be made over several 10-minute device calls: one --models
# subset per call, then --only table. Delete a CSV to measure it again.
#
# From a staged build (the GPU machine lacks the build's libraries; carry the stage, and
# copy export_zoo.py into an ignored folder of the checkout, since ../shared does not travel):
#   RUN=.stage/run KILN=build/tools/kiln benchmarks/run_zoo_benchmarks.sh --export-zoo .devdata/export_zoo.py
#
# Environment: KILN (default build/tools/kiln), RUN (a prefix that runs it, e.g.
# .stage/run; KILN is then relative to the stage), PYTHON (python3), ITERS and WARMUP
# (50 and 10, for kiln and PyTorch alike), KILN_ARGS (more kiln bench arguments).
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=/tmp/zoo-bench
models="efficientnet:1 efficientnet:32 mobilenet_v3:1 mobilenet_v3:32 convnext:1 convnext:32 swin:1 swin:32
        vit:1 vit:32 whisper_encoder:1 bert:8 distilbert:8 t5_encoder:8 gpt2:8 llama:8"
seq=128
only=all
export_zoo=${EXPORT_ZOO:-}
usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
while [[ $# -gt 0 ]]; do
  case $1 in
    --out) out=${2:?--out needs a folder}; shift 2 ;;
    --models) models=${2:?--models needs a list}; shift 2 ;;
    --seq) seq=${2:?--seq needs a number}; shift 2 ;;
    --only) only=${2:?--only needs export, kiln, torch or table}; shift 2 ;;
    --export-zoo) export_zoo=${2:?--export-zoo needs the path of export_zoo.py}; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "run_zoo_benchmarks.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
case $only in all|export|kiln|torch|table) ;; *) echo "--only: expected export, kiln, torch or table, got '$only'" >&2; exit 2 ;; esac
if [[ $only != table && ! -f $export_zoo ]]; then
  echo "run_zoo_benchmarks.sh: --export-zoo: no export_zoo.py at '${export_zoo}' (../shared/zoo/export_zoo.py)" >&2
  exit 2
fi
[[ $seq =~ ^[0-9]+$ ]] || { echo "--seq: expected a number, got '$seq'" >&2; exit 2; }
KILN=${KILN:-build/tools/kiln}
RUN=${RUN:-}
PYTHON=${PYTHON:-python3}
ITERS=${ITERS:-50}
WARMUP=${WARMUP:-10}
mkdir -p "$out" || exit 1
status=0

for item in ${models//,/ }; do
  IFS=: read -r name batch exporter <<< "$item"
  if [[ -z $name || ! $batch =~ ^[0-9]+$ ]]; then
    echo "run_zoo_benchmarks.sh: model '$item': expected NAME:BATCH[:EXPORTER]" >&2; exit 2
  fi
  case ${exporter:-} in
    "") case $name in gpt2|llama|vit) exporter=dynamo ;; *) exporter=legacy ;; esac ;;
    legacy|dynamo) ;;
    *) echo "run_zoo_benchmarks.sh: model '$item': exporter must be legacy or dynamo" >&2; exit 2 ;;
  esac
  dir=$out/models/${name}_$batch
  onnx=$dir/$name.$exporter/model.onnx
  if [[ $only == all || $only == export ]] && [[ ! -f $onnx ]]; then
    echo "== export $name ($exporter) at batch $batch"
    mkdir -p "$dir" || exit 1
    "$PYTHON" "$export_zoo" "$dir" --full --only "$name" --exporters "$exporter" --batch "$batch" --seq "$seq" \
      > "$dir/export.log" 2>&1
    [[ -f $onnx ]] || { echo "   export failed (see $dir/export.log): $(tail -1 "$dir/export.log")" >&2; status=1; continue; }
  fi
  kcsv=$out/kiln_${name}_$batch.csv
  if [[ $only == all || $only == kiln ]] && [[ ! -f $kcsv ]]; then
    [[ -f $onnx ]] || { echo "   $name at $batch: not exported yet (--only export)" >&2; status=1; continue; }
    # The exported inputs' shapes, whatever the export left dynamic.
    shapes=$("$PYTHON" -c 'import json, sys
e = json.load(open(sys.argv[1]))[sys.argv[2]]
print(" ".join("--input-shape %s=%s" % (k, "x".join(map(str, v))) for k, v in e["inputs"].items()))' \
      "$dir/manifest.json" "$name.$exporter") || { status=1; continue; }
    echo "== kiln bench $name at $batch"
    # shellcheck disable=SC2086  # $shapes and KILN_ARGS are lists of arguments
    if $RUN "$KILN" bench "$onnx" --compare fused,unfused $shapes --iterations "$ITERS" --warmup "$WARMUP" \
        --csv "$kcsv.tmp" ${KILN_ARGS:-}; then
      mv "$kcsv.tmp" "$kcsv"
    else
      rm -f "$kcsv.tmp"; status=1
    fi
  fi
  tcsv=$out/torch_${name}_$batch.csv
  if [[ $only == all || $only == torch ]] && [[ ! -f $tcsv ]]; then
    echo "== PyTorch $name at $batch"
    if "$PYTHON" "$here/zoo_torch_bench.py" --export-zoo "$export_zoo" --models "$name:$batch" --seq "$seq" \
        --iters "$ITERS" --warmup "$WARMUP" --csv "$tcsv.tmp"; then
      mv "$tcsv.tmp" "$tcsv"
    else
      rm -f "$tcsv.tmp"; status=1
    fi
  fi
done

if [[ $only == all || $only == table ]]; then
  "$PYTHON" "$here/zoo_table.py" "$out" --csv "$out/zoo_table.csv" || status=1
fi
exit $status
