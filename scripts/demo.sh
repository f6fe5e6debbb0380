#!/usr/bin/env bash
# The main job on an example model: installs what is missing, builds, generates a
# small model with models/, compiles it into a bundle, and runs the bundle — on the
# GPU when there is one, else on the CPU backend — next to the CPU reference run.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
bash scripts/build.sh
build=${KILN_BUILD_DIR:-build}
out=${KILN_DEMO_DIR:-demo-out}
mkdir -p "$out"
"$build/models/kiln_make_model" tiny_cnn -o "$out/tiny_cnn.onnx" --batch 2
"$build/tools/kiln" inspect "$out/tiny_cnn.onnx"
"$build/tools/kiln" compile "$out/tiny_cnn.onnx" -o "$out/tiny_cnn.kiln"
"$build/tools/kiln" inspect "$out/tiny_cnn.kiln"
"$build/tools/kiln" run "$out/tiny_cnn.kiln" --input x=random:1 --iterations 10 --output-dir "$out/bundle"
"$build/tools/kiln" run "$out/tiny_cnn.onnx" --reference --input x=random:1 --output-dir "$out/reference"
