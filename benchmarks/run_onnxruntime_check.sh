#!/usr/bin/env bash
# Issue 7 §5 on the GPU machine: each architecture compiled by kiln (fp16 and bf16),
# run on the GPU, and compared with onnxruntime's CPU outputs for the same file and
# inputs (benchmarks/compare_onnxruntime.py; tolerances in docs/gpu.md).
#
#   benchmarks/run_onnxruntime_check.sh ["bert_base:1 distilbert:1 ..."]
#
# Environment: KILN_BIN (folder with tools/kiln and models/kiln_make_model; default
# build), RUN (prefix that runs them, e.g. .stage/run for a staged build), WORK (scratch
# folder, default /tmp/kiln-ort). Exits 1 when any output is beyond tolerance.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
models=${1:-"bert_base:1 distilbert:1 vit_b16:1 gpt2:8 resnet50:1 mobilenet_v2:1"}
KILN_BIN=${KILN_BIN:-build}
RUN=${RUN:-}
WORK=${WORK:-/tmp/kiln-ort}
mkdir -p "$WORK"
rc=0
for mb in $models; do
  m=${mb%:*}; b=${mb#*:}
  onnx=$WORK/$m.onnx; in=$WORK/$m.in; out=$WORK/$m.out
  $RUN "$KILN_BIN/models/kiln_make_model" "$m" -o "$onnx" --batch "$b" --inputs "$in" > /dev/null || { rc=1; continue; }
  feeds=(); for f in "$in"/*.npy; do feeds+=(--input "$(basename "$f" .npy)=$f"); done
  for p in fp16 bf16; do
    tol=(); [ "$p" = bf16 ] && tol=(--max-rel 5e-2 --min-cosine 0.995)
    if ! $RUN "$KILN_BIN/tools/kiln" compile "$onnx" -o "$WORK/$m.kiln" --precision "$p" > "$WORK/compile.log" 2>&1; then
      echo "$m ($p): kiln compile failed:"; tail -5 "$WORK/compile.log"; rc=1; continue
    fi
    rm -rf "$out"
    if ! $RUN "$KILN_BIN/tools/kiln" run "$WORK/$m.kiln" "${feeds[@]}" --output-dir "$out" > "$WORK/run.log" 2>&1; then
      echo "$m ($p): kiln run failed:"; tail -5 "$WORK/run.log"; rc=1; continue
    fi
    echo "[$p]"
    python3 "$here/compare_onnxruntime.py" "$onnx" --inputs "$in" --kiln-outputs "$out" "${tol[@]}" || rc=1
  done
  rm -rf "$onnx" "$in" "$out" "$WORK/$m.kiln"
done
exit $rc
