#!/usr/bin/env bash
# Issue 7's whole-model benchmark table, on the GPU machine, in one session on one GPU:
# for each MODEL:BATCH, kiln bench (fused vs unfused) on the ONNX file kiln_make_model
# writes, then PyTorch eager and torch.compile (benchmarks/torch_baseline.py) on the
# same architectures; everything is merged into OUT/models.csv and a table.
#
#   benchmarks/run_model_benchmarks.sh [--out DIR] [--models "bert_base:1 gpt2:8 ..."]
#                                      [--only kiln|torch|merge] [--keep-models]
#
# From a build tree (KILN_BIN=build, the default):
#   benchmarks/run_model_benchmarks.sh --out /tmp/kiln-models
# From a staged build (the GPU machine lacks the build's libraries):
#   mkdir -p build-bench/tools build-bench/models
#   cp build/tools/kiln build-bench/tools/ && cp build/models/kiln_make_model build-bench/models/
#   ../shared/device/stage build-bench .stage            # then carry ".stage"
#   RUN=.stage/run KILN_BIN=build-bench benchmarks/run_model_benchmarks.sh --out "$OUT"
#
# One command on the GPU machine may run 10 minutes at most and the whole table takes
# longer, so it can be split: --only kiln / --only torch with a --models subset per call
# (each part writes its own CSV under --out, named after its models), then --only merge
# (it reads every kiln_*.csv and torch_*.csv under --out; a later file's row for the
# same model, batch and configuration replaces an earlier one's).
#
# Environment:
#   KILN_BIN     folder holding tools/kiln and models/kiln_make_model (default: build)
#   RUN          prefix that runs them, e.g. .stage/run for a staged build (default: none);
#                with RUN set, KILN_BIN is relative to the stage folder, as the stage's
#                run script expects
#   KILN, MAKE_MODEL   the two programs' paths, if not under KILN_BIN
#   PYTHON       default python3
#   ITERS, WARMUP      timed and warm-up runs for both kiln bench and PyTorch (50, 10)
#   KILN_ARGS    extra arguments for kiln bench (e.g. "--compare fused,unfused,library")
#   TORCH_ARGS   extra arguments for torch_baseline.py (e.g. "--modes eager" or
#                "--attention eager,sdpa --time-budget 400")
#   MODEL_DIR    where the .onnx files and sample inputs go (default: /tmp/kiln-model-files);
#                each model's files are deleted after its bench unless --keep-models
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=/tmp/kiln-model-bench
models="bert_base:1 bert_base:32 gpt2:8 vit_b16:1 resnet50:1 resnet50:128 distilbert:1 mobilenet_v2:1"
only=all
keep=0
usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
while [[ $# -gt 0 ]]; do
  case $1 in
    --out) out=${2:?--out needs a folder}; shift 2 ;;
    --models) models=${2:?--models needs a list}; shift 2 ;;
    --only) only=${2:?--only needs kiln, torch or merge}; shift 2 ;;
    --keep-models) keep=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "run_model_benchmarks.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
case $only in all|kiln|torch|merge) ;; *) echo "--only: expected kiln, torch or merge, got '$only'" >&2; exit 2 ;; esac
models=${models//,/ }

KILN_BIN=${KILN_BIN:-build}
KILN=${KILN:-$KILN_BIN/tools/kiln}
MAKE_MODEL=${MAKE_MODEL:-$KILN_BIN/models/kiln_make_model}
RUN=${RUN:-}
PYTHON=${PYTHON:-python3}
ITERS=${ITERS:-50}
WARMUP=${WARMUP:-10}
MODEL_DIR=${MODEL_DIR:-/tmp/kiln-model-files}
read -r -a kiln_args <<< "${KILN_ARGS:-}"
read -r -a torch_args <<< "${TORCH_ARGS:-}"

mkdir -p "$out" "$MODEL_DIR" || exit 1
failures=()

# Runs a kiln program directly or through the stage wrapper.
run_prog() {
  if [[ -n $RUN ]]; then "$RUN" "$@"; else "$@"; fi
}

# The models list as a file-name tag: bert_base:1 gpt2:8 -> bert_base-1_gpt2-8.
tag=$(tr ' :' '_-' <<< "$models" | tr -s '_' | sed 's/^_//; s/_$//')

if [[ $only == all || $only == kiln ]]; then
  command -v nvidia-smi > /dev/null && nvidia-smi --query-gpu=name --format=csv,noheader | head -1 > "$out/gpu.txt"
  for item in $models; do
    name=${item%%:*}; batch=${item#*:}
    [[ $batch == "$item" ]] && batch=1
    stem="${name}_b${batch}"
    onnx="$MODEL_DIR/$stem.onnx"; inputs="$MODEL_DIR/$stem.in"
    echo "=== kiln: $name batch $batch ($(date +%T))"
    rm -rf "$inputs"
    # --inputs writes one .npy per model input: token ids uniform in [0, vocab) (never
    # all zeros), attention masks that show every position, N(0, 1) images.
    if ! run_prog "$MAKE_MODEL" "$name" -o "$onnx" --batch "$batch" --inputs "$inputs"; then
      echo "FAILED: kiln_make_model $name --batch $batch"; failures+=("make_model $item"); continue
    fi
    feeds=()
    for npy in "$inputs"/*.npy; do
      [[ -e $npy ]] || continue
      input=$(basename "$npy" .npy)
      feeds+=(--input "$input=$npy")
    done
    if ! run_prog "$KILN" bench "$onnx" --compare fused,unfused --iterations "$ITERS" --warmup "$WARMUP" \
        "${feeds[@]}" "${kiln_args[@]}" --csv "$out/kiln_$stem.csv" 2>&1 | tee "$out/kiln_$stem.log"; then
      echo "FAILED: kiln bench $name batch $batch (log: $out/kiln_$stem.log)"; failures+=("kiln bench $item")
    fi
    [[ $keep == 1 ]] || rm -rf "$onnx" "$inputs"
  done
fi

if [[ $only == all || $only == torch ]]; then
  echo "=== PyTorch: $models ($(date +%T))"
  if ! "$PYTHON" "$here/torch_baseline.py" --models "${models// /,}" --iters "$ITERS" --warmup "$WARMUP" \
      "${torch_args[@]}" --csv "$out/torch_$tag.csv" 2>&1 | tee "$out/torch_$tag.log"; then
    echo "FAILED (some rows): torch_baseline.py (log: $out/torch_$tag.log)"; failures+=("torch $tag")
  fi
fi

if [[ $only == all || $only == merge ]]; then
  echo "=== merge -> $out/models.csv"
  if ! "$PYTHON" - "$out" <<'PY'
import csv, glob, os, re, sys

out = sys.argv[1]
gpu = open(os.path.join(out, "gpu.txt")).read().strip() if os.path.exists(os.path.join(out, "gpu.txt")) else ""
fields = ["model", "batch", "system", "config", "median_ms", "min_ms", "p90_ms", "compile_s", "memory_bytes",
          "memory_kind", "launches", "max_rel_diff", "gpu", "version", "status", "source"]
rows = {}
files = sorted(glob.glob(os.path.join(out, "kiln_*.csv")) + glob.glob(os.path.join(out, "torch_*.csv")),
               key=os.path.getmtime)
for path in files:
    base = os.path.basename(path)
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            if base.startswith("kiln_"):
                m = re.match(r"kiln_(.+)_b(\d+)\.csv$", base)
                if not m:
                    continue
                row = {"model": m.group(1), "batch": m.group(2), "system": "kiln", "config": r["config"],
                       "median_ms": r["median_ms"], "min_ms": r["min_ms"], "p90_ms": r["p90_ms"],
                       "compile_s": r["compile_s"], "memory_bytes": r["device_bytes"],
                       "memory_kind": "session (cudaMemGetInfo delta)", "launches": r["launches"],
                       "max_rel_diff": r["max_rel_diff"], "gpu": gpu, "version": "", "status": "ok"}
            else:
                attn = r.get("attention", "-")
                config = r["mode"] if attn in ("-", "eager", "") else f"{r['mode']}+{attn}"
                row = {"model": r["model"], "batch": r["batch"], "system": "torch", "config": config,
                       "median_ms": r["median_ms"], "min_ms": r["min_ms"], "p90_ms": r["p90_ms"],
                       "compile_s": r["compile_s"], "memory_bytes": r["peak_mem_bytes"],
                       "memory_kind": "peak allocated", "launches": "", "max_rel_diff": "", "gpu": r["gpu"],
                       "version": r["torch_version"], "status": r["status"]}
            row["source"] = base
            rows[(row["model"], row["batch"], row["system"], row["config"])] = row
with open(os.path.join(out, "models.csv"), "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=fields)
    w.writeheader()
    for key in sorted(rows):
        w.writerow(rows[key])

def ms(model, batch, system, config):
    r = rows.get((model, batch, system, config))
    try:
        return float(r["median_ms"]) if r and r["median_ms"] else None
    except ValueError:
        return None

def fmt(v):
    return f"{v:.3f}" if v is not None else "-"

def ratio(a, b):
    return f"{a / b:.2f}x" if a is not None and b else "-"

sdpa = any(k[3] == "compile+sdpa" for k in rows)
print("| model | batch | kiln unfused ms | kiln fused ms | torch eager ms | torch.compile ms "
      + ("| torch.compile+sdpa ms " if sdpa else "") + "| fused vs unfused | fused vs torch.compile |")
print("|---|---:|---:|---:|---:|---:|---:|---:|" + ("---:|" if sdpa else ""))
for model, batch in sorted({(k[0], k[1]) for k in rows}, key=lambda k: (k[0], int(k[1]))):
    u, fu = ms(model, batch, "kiln", "unfused"), ms(model, batch, "kiln", "fused")
    e, c = ms(model, batch, "torch", "eager"), ms(model, batch, "torch", "compile")
    cs = ms(model, batch, "torch", "compile+sdpa")
    best = min((t for t in (c, cs) if t is not None), default=None)
    print(f"| {model} | {batch} | {fmt(u)} | {fmt(fu)} | {fmt(e)} | {fmt(c)} | " + (f"{fmt(cs)} | " if sdpa else "")
          + f"{ratio(u, fu)} | {ratio(best, fu)} |")
print("(ratios > 1: kiln fused is faster; vs torch.compile: the faster of its attention variants; "
      "medians of device time per run)")
print(f"{len(rows)} rows -> {os.path.join(out, 'models.csv')}")
PY
  then
    failures+=("merge")
  fi
fi

if [[ ${#failures[@]} -gt 0 ]]; then
  echo "run_model_benchmarks.sh: ${#failures[@]} step(s) failed: ${failures[*]}"
  exit 1
fi
