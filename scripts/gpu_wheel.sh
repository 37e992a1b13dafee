#!/usr/bin/env bash
# Builds bwdconv's wheel for the GPU machine ahead, on this (CPU) machine, so
# that scripts/gpu_check.sh installs it in seconds instead of compiling for
# minutes: Python 3.12 (pyenv's), PyPI's torch 2.11.0 (the +cu130 build the
# GPU image holds), nvcc's device code for sm_90 only (H100/H200), built with
#   pip wheel . --no-build-isolation --no-deps
# in a Python 3.12 virtual environment, from a copy of the working tree
# (~/.cache/bwdconv/gpu-wheel-src: its own build/ objects, so neither the
# Python version nor the targets mix with the development build's), into
# build/gpu-wheel/ beside sources.sha256 (the digest of the sources it was
# built from, common.sh's build_inputs_digest, and the git revision).
# gpu_check.sh installs that wheel where the digest matches the tree it runs
# on and it imports, and builds there otherwise; the wheel's cpXY tag and the
# import check cover Python and torch.
#
#   bash scripts/gpu_wheel.sh        # then carry build/gpu-wheel to the GPU machine
#
# BWDCONV_WHEEL_PYTHON: the Python 3.12 to use (default: pyenv's newest 3.12);
# BWDCONV_WHEEL_TORCH (default torch==2.11.0); TORCH_CUDA_ARCH_LIST (default
# 9.0); MAX_JOBS (default: the CPU count). On a 2-core machine the first
# build takes about 10-20 minutes (nvcc on csrc/hip/*.cu); later ones
# recompile only what changed.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=common.sh
source "$ROOT/scripts/common.sh"
CACHE="${BWDCONV_WHEEL_CACHE:-$HOME/.cache/bwdconv}"
VENV="$CACHE/gpu-wheel-venv-py312"
SRC="$CACHE/gpu-wheel-src"
OUT="${BWDCONV_WHEEL_OUT:-$ROOT/build/gpu-wheel}"
TORCH_SPEC="${BWDCONV_WHEEL_TORCH:-torch==2.11.0}"
export TORCH_CUDA_ARCH_LIST="${TORCH_CUDA_ARCH_LIST:-9.0}"
export MAX_JOBS="${MAX_JOBS:-$(nproc)}"

find_python() {
  if [ -n "${BWDCONV_WHEEL_PYTHON:-}" ]; then
    echo "$BWDCONV_WHEEL_PYTHON"
    return
  fi
  local root
  root="$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")"
  # pyenv's newest installed 3.12.x
  ls -d "$root"/versions/3.12.* 2>/dev/null | sort -V | tail -n 1 | sed 's#$#/bin/python3.12#'
}

PY312="$(find_python)"
if [ -z "$PY312" ] || [ ! -x "$PY312" ]; then
  echo "gpu_wheel.sh: no Python 3.12 found (pyenv versions: $(ls "$(pyenv root 2>/dev/null || echo ~/.pyenv)/versions" 2>/dev/null | tr '\n' ' ')); install one (pyenv install 3.12) or set BWDCONV_WHEEL_PYTHON" >&2
  exit 1
fi
command -v nvcc > /dev/null || [ -x /usr/local/cuda/bin/nvcc ] || {
  echo "gpu_wheel.sh: no nvcc: the wheel would hold no device code" >&2; exit 1; }
export PATH="$PATH:/usr/local/cuda/bin"

echo "== Python $("$PY312" -c 'import platform; print(platform.python_version())') ($PY312)"
if [ ! -x "$VENV/bin/python" ]; then
  "$PY312" -m venv "$VENV"
fi
"$VENV/bin/pip" install --progress-bar off -q --upgrade pip wheel "setuptools<82" ninja pybind11 numpy
"$VENV/bin/pip" install --progress-bar off -q "$TORCH_SPEC"
echo "== $("$VENV/bin/python" -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda)'), nvcc $(nvcc --version | grep -o 'release [0-9.]*'), targets $TORCH_CUDA_ARCH_LIST"

echo "== sources: $ROOT -> $SRC"
bash "$ROOT/scripts/copy_tree.sh" "$ROOT" "$SRC"

echo "== pip wheel . --no-build-isolation --no-deps (MAX_JOBS=$MAX_JOBS)"
start=$SECONDS
rm -rf "$SRC/dist-wheel"
(cd "$SRC" && "$VENV/bin/pip" wheel . --no-build-isolation --no-deps -w "$SRC/dist-wheel" -v \
  > "$SRC/wheel.log" 2>&1) || { tail -n 40 "$SRC/wheel.log"; echo "gpu_wheel.sh: the build failed ($SRC/wheel.log)" >&2; exit 1; }
grep -E '^bwdconv:' "$SRC/wheel.log" | sort -u || true
wheel="$(ls "$SRC"/dist-wheel/bwdconv-*.whl)"
mkdir -p "$OUT"
rm -f "$OUT"/bwdconv-*.whl
cp "$wheel" "$OUT/"
echo "$(build_inputs_digest "$SRC") $(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown)" \
  > "$OUT/sources.sha256"
echo "== $OUT/$(basename "$wheel") ($(du -h "$wheel" | cut -f1), built in $((SECONDS - start)) s)"
echo "   the GPU check installs it where run with it: carry build/gpu-wheel (or BWDCONV_WHEEL=<path>)"
