#!/usr/bin/env bash
# The test command: installs what is missing, builds, and runs every test that
# this machine can run (tests labelled `gpu` skip with a message without a GPU).
# Tests that use ONNX's backend test data read it from $KILN_ONNX_DATA, the model
# zoo tests (real PyTorch exports) from $KILN_ZOO_DATA; each skips with a message
# when its variable is unset.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
bash scripts/build.sh
build=${KILN_BUILD_DIR:-build}
echo "kiln: test data: ${KILN_ONNX_DATA:-<unset: data-driven tests will skip>}"
echo "kiln: model zoo: ${KILN_ZOO_DATA:-<unset: zoo tests will skip>}"
# Tests compile many bundles: keep their kernel cache inside the build directory
# (not the user's ~/.cache/kiln) unless the caller chose one.
case "$build" in /*) build_abs=$build ;; *) build_abs=$PWD/$build ;; esac
export KILN_CACHE_DIR=${KILN_CACHE_DIR:-$build_abs/kernel-cache}
ctest --test-dir "$build" --output-on-failure -j"$(nproc)" --timeout 1200
