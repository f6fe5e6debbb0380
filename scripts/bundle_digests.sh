#!/usr/bin/env bash
# Prints one sha256 per bundle that `kiln compile` writes for every zoo case and every
# generated model, fused and unfused, for sm_90a and sm_80, fp16 and fp32. A refactor
# of the compiler that must not change its output is checked by running this before
# and after and diffing the two lists (docs/contributing.md).
#
#   bash scripts/bundle_digests.sh BUILD_DIR ZOO_DIR > digests.txt
#
# BUILD_DIR holds tools/kiln and models/kiln_make_model; ZOO_DIR is the zoo's data
# ($KILN_ZOO_DATA). Models are written to, and compiled from, one fixed scratch
# directory, since the manifest records the source path.
set -euo pipefail
build=${1:?usage: bundle_digests.sh BUILD_DIR ZOO_DIR}
zoo=${2:?usage: bundle_digests.sh BUILD_DIR ZOO_DIR}
kiln="$build/tools/kiln"
make_model="$build/models/kiln_make_model"
work=/tmp/kiln_bundle_digests
rm -rf "$work/models" "$work/out" && mkdir -p "$work/models" "$work/out"
export KILN_CACHE_DIR="$work/cache"  # kept between runs: only compiled modules

# --input-shape flags for a zoo case, from the shapes in the zoo's manifest.json.
zoo_shapes() {
  python3 -c 'import json, sys
m = json.load(open(sys.argv[1]))[sys.argv[2]]
print(" ".join("--input-shape %s=%s" % (k, "x".join(map(str, v))) for k, v in sorted(m["inputs"].items())))' \
    "$zoo/manifest.json" "$1"
}

declare -a sources=()
for dir in "$zoo"/*/; do
  [[ -f "$dir/model.onnx" ]] || continue
  sources+=("$dir/model.onnx")
done
gen() {  # NAME FILE ARGS...
  local name=$1 file=$2; shift 2
  "$make_model" "$name" -o "$work/models/$file.onnx" "$@" > /dev/null
  sources+=("$work/models/$file.onnx")
}
gen mlp mlp
gen tiny_cnn tiny_cnn
gen bert_layer bert_layer --hidden 64 --heads 4 --seq 16 --ffn 128
gen gpt2_block gpt2_block --hidden 64 --heads 4 --seq 16
gen distilbert distilbert --layers 2 --hidden 64 --heads 4 --ffn 128 --seq 16 --vocab 100
gen gpt2 gpt2 --layers 2 --hidden 64 --heads 4 --seq 16 --vocab 100 --batch 2
gen vit_b16 vit --layers 2 --hidden 64 --heads 4 --ffn 128 --image 32 --classes 10
gen resnet50 resnet50 --image 32 --width 8 --classes 10
gen resnet50 resnet50_bn --image 32 --width 8 --classes 10 --batchnorm 1
gen mobilenet_v2 mobilenet_v2 --image 32 --classes 10

for src in "${sources[@]}"; do
  case "$src" in "$zoo"/*) label=$(basename "$(dirname "$src")") ;; *) label=$(basename "$src" .onnx) ;; esac
  for arch in sm_90a sm_80; do
    for precision in fp16 fp32; do
      for fuse in fused unfused; do
        flags=(--arch "$arch" --precision "$precision" --no-tuning-db)
        # shellcheck disable=SC2206
        [[ $src == "$zoo"/* ]] && flags+=($(zoo_shapes "$label"))
        [[ $fuse == unfused ]] && flags+=(--no-fuse)
        out="$work/out/$label.$arch.$precision.$fuse.kiln"
        if "$kiln" compile "$src" -o "$out" "${flags[@]}" > "$work/log" 2>&1; then
          echo "$(sha256sum < "$out" | cut -c1-16) $label $arch $precision $fuse"
        else
          echo "failed           $label $arch $precision $fuse: $(tail -1 "$work/log")"
        fi
      done
    done
  done
done
