#!/usr/bin/env bash
# Configures and builds kiln into ${KILN_BUILD_DIR:-build} (Release, Ninja).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${KILN_BUILD_DIR:-build}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@"
cmake --build "$build" -j"$(nproc)"
