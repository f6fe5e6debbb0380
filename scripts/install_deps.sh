#!/usr/bin/env bash
# Installs the Debian packages kiln needs, if missing (idempotent; runs as root or
# through sudo). The CUDA toolkit is expected at /usr/local/cuda and is only
# needed for GPU work; the host build and the CPU reference do without it.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  libonnx-dev libprotobuf-dev protobuf-compiler
  libabsl-dev libtbb-dev libgtest-dev
  ccache
  python3 python3-numpy python3-pytest
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  echo "kiln: installing ${missing[*]}"
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "kiln: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
    sudo="sudo"
  fi
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "kiln: all Debian packages present"
fi

if [ -x /usr/local/cuda/bin/nvcc ] || [ -e /usr/local/cuda/lib64/libnvrtc.so ]; then
  echo "kiln: CUDA toolkit found at /usr/local/cuda"
else
  echo "kiln: note: no CUDA toolkit at /usr/local/cuda (GPU features unavailable; CPU reference works)"
fi
