#!/usr/bin/env bash
# Sets up a fresh Debian machine for bwdconv and builds it in place:
# system packages (compilers, GoogleTest, hipcc), a virtual environment with
# torch from PyPI, and the extension (with the CUDA kernels where nvcc is found).
# Re-runs reuse the environment and pip's cache. Source it or run it; it
# leaves the environment at $BWDCONV_VENV (default ~/.cache/bwdconv/venv).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BWDCONV_VENV="${BWDCONV_VENV:-$HOME/.cache/bwdconv/venv}"
TORCH_SPEC="${BWDCONV_TORCH:-torch==2.11.0}"
TORCHVISION_SPEC="${BWDCONV_TORCHVISION:-torchvision==0.26.0}"
export BWDCONV_VENV

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

install_system_packages() {
  local wanted=(g++ cmake ninja-build libgtest-dev python3-venv hipcc libamdhip64-dev)
  local missing=()
  for pkg in "${wanted[@]}"; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
  done
  if [ "${#missing[@]}" -gt 0 ]; then
    echo "== installing system packages: ${missing[*]}"
    as_root apt-get update -q
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
  fi
}

install_python_packages() {
  if [ ! -x "$BWDCONV_VENV/bin/python" ]; then
    echo "== creating $BWDCONV_VENV"
    python3 -m venv "$BWDCONV_VENV"
  fi
  echo "== python packages ($TORCH_SPEC)"
  "$BWDCONV_VENV/bin/pip" install -q --upgrade pip wheel "setuptools<82"
  "$BWDCONV_VENV/bin/pip" install -q "$TORCH_SPEC" "$TORCHVISION_SPEC" numpy ninja pybind11 tqdm \
    pytest expecttest matplotlib nvidia-cuda-cuobjdump==13.2.86 nvidia-cuda-nvdisasm==13.2.86
}

# setup.py keeps the extension's objects here between builds; ninja recompiles
# only the sources that changed or include a header that did.
OBJECTS="$ROOT/build/extension"

count_objects() { { find "$OBJECTS" -name '*.o' "$@" 2>/dev/null || true; } | wc -l; }

build_extension() {
  echo "== building bwdconv (pip install -e . --no-build-isolation; objects kept in build/extension)"
  local start=$SECONDS stamp compiled
  stamp="$(mktemp)"
  (cd "$ROOT" && MAX_JOBS="${MAX_JOBS:-$(nproc)}" \
    "$BWDCONV_VENV/bin/pip" install -q -e . --no-build-isolation)
  compiled="$(count_objects -newer "$stamp")"
  rm -f "$stamp"
  echo "== extension built in $((SECONDS - start)) s: $compiled of $(count_objects) objects compiled, the others up to date"
  echo "== $(cd /tmp && "$BWDCONV_VENV/bin/python" -c \
    'import torch, bwdconv; print("torch", torch.__version__, "- csrc/hip kernels in the extension:", bwdconv._library._C.gpu_kernels)')"
}

install_system_packages
install_python_packages
build_extension
