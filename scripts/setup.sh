#!/usr/bin/env bash
# Sets up a fresh Debian machine for bwdconv and builds it in place:
# system packages (compilers, GoogleTest, hipcc), a virtual environment with
# torch from PyPI, and the extension. Re-runs reuse the environment and pip's
# cache. Run it (bash scripts/setup.sh); the environment is $BWDCONV_VENV,
# else the active virtual environment ($VIRTUAL_ENV), else ~/.cache/bwdconv/venv.
#
#   --device-code all      (default; test.sh) the kernels for every target the
#                          toolchain allows: nvcc and TORCH_CUDA_ARCH_LIST (default
#                          8.0;9.0), or hipcc and PYTORCH_ROCM_ARCH
#   --device-code present  (bench.sh) for the GPUs on this machine, or the
#                          architectures TORCH_CUDA_ARCH_LIST / PYTORCH_ROCM_ARCH
#                          ask for; none without a GPU (BWDCONV_FORCE_CPU=1)
# Each configuration keeps its objects apart (setup.py, objects_directory).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=common.sh
source "$ROOT/scripts/common.sh"
# The user's own active environment (not ~/.cache/bwdconv/venv activated)
users_env=0
if [ -z "${BWDCONV_VENV:-}" ] && [ -n "${VIRTUAL_ENV:-}" ] \
    && [ "$(realpath -m "$VIRTUAL_ENV")" != "$(realpath -m "$DEFAULT_VENV")" ]; then
  users_env=1
fi
BWDCONV_VENV="$(bwdconv_venv)"
TORCH_SPEC="${BWDCONV_TORCH:-torch==2.11.0}"
TORCHVISION_SPEC="${BWDCONV_TORCHVISION:-torchvision==0.26.0}"
export BWDCONV_VENV
PYTHON="$BWDCONV_VENV/bin/python"

device_code=all
while [ $# -gt 0 ]; do
  case "$1" in
    --device-code) device_code="${2:-}"; shift 2 ;;
    --device-code=*) device_code="${1#*=}"; shift ;;
    *) echo "setup.sh: unknown argument $1 (--device-code all|present)" >&2; exit 2 ;;
  esac
done
case "$device_code" in all|present) ;; *)
  echo "setup.sh: --device-code must be all or present, not '$device_code'" >&2; exit 2 ;;
esac

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

install_system_packages() {
  local wanted=(g++ cmake ninja-build libgtest-dev python3-venv hipcc libamdhip64-dev)
  local missing=()
  for pkg in "${wanted[@]}"; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
  done
  if [ "${#missing[@]}" -gt 0 ]; then
    echo "== installing system packages: ${missing[*]}"
    run_with_progress "apt-get update" '^(Get|Hit):' "" as_root apt-get update -q
    run_with_progress "apt-get install" '^(Unpacking|Setting up) ' "" \
      as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
  fi
}

# True where the environment is the user's active one and has a torch
# bwdconv supports (and BWDCONV_TORCH is not set): setup.sh then leaves
# torch and torchvision as they are.
keeps_users_torch() {
  [ "$users_env" = 1 ] && [ -z "${BWDCONV_TORCH:-}" ] || return 1
  "$PYTHON" - "$ROOT/python/bwdconv/_version.py" 2>/dev/null <<'PY'
import runpy, sys
import torch
sys.exit(runpy.run_path(sys.argv[1])["too_old_message"](torch.__version__) is not None)
PY
}

install_python_packages() {
  if [ ! -x "$PYTHON" ]; then
    echo "== creating $BWDCONV_VENV"
    python3 -m venv "$BWDCONV_VENV"
  fi
  local torch_specs=("$TORCH_SPEC" "$TORCHVISION_SPEC")
  if keeps_users_torch; then
    echo "== python packages: keeping torch $("$PYTHON" -c 'import torch; print(torch.__version__)') of $BWDCONV_VENV"
    torch_specs=()
  else
    echo "== python packages ($TORCH_SPEC)"
  fi
  run_with_progress "pip" '^(Collecting|Successfully)' "" \
    "$BWDCONV_VENV/bin/pip" install --progress-bar off --upgrade pip wheel "setuptools<82"
  run_with_progress "pip install (torch's download takes a minute or more)" \
    '^(Collecting|Downloading|Installing collected|Successfully installed)' "" \
    "$BWDCONV_VENV/bin/pip" install --progress-bar off "${torch_specs[@]}" numpy ninja pybind11 tqdm \
    pytest pytest-xdist expecttest matplotlib nvidia-cuda-cuobjdump==13.2.86 nvidia-cuda-nvdisasm==13.2.86
}

build_extension() {
  echo "== building bwdconv (pip install -e . --no-build-isolation; objects kept under build/)"
  local start=$SECONDS log="$ROOT/build/pip-install.log" compiled objects
  mkdir -p "$ROOT/build"
  # -v: setup.py's lines and ninja's "[n/m]" per object, shown as they come.
  (cd "$ROOT" && export MAX_JOBS="${MAX_JOBS:-$(nproc)}" && run_with_progress "the extension build" \
    '^ *\[[0-9]+/[0-9]+\] |^ *bwdconv:|^ *ninja: no work' "$log" \
    "$BWDCONV_VENV/bin/pip" install -v -e . --no-build-isolation)
  # (pip -v indents the build's lines)
  compiled="$(grep -oE '^ *\[[0-9]+/[0-9]+\]' "$log" | tail -n 1 | sed -E 's#^ *\[[0-9]+/([0-9]+)\]#\1#' || true)"
  objects="$(sed -n 's/^ *bwdconv: objects in //p' "$log" | tail -n 1)"
  local total
  total="$({ find "$ROOT/${objects:-build/extension}" -name '*.o' 2>/dev/null || true; } | wc -l)"
  echo "== extension built in $((SECONDS - start)) s: ${compiled:-0} of $total objects compiled in ${objects:-build/extension}, the others up to date"
  echo "== $(cd /tmp && "$PYTHON" -c \
    'import torch, bwdconv; print("torch", torch.__version__, "- csrc/hip kernels in the extension:", bwdconv._library._C.gpu_kernels)')"
}

NO_GPU_FOUND=0
if [ "$device_code" = present ]; then
  choose_device_code
  echo "== device code: $DEVICE_CODE"
else
  echo "== device code: every kernel for every target the toolchain allows (CUDA: TORCH_CUDA_ARCH_LIST, default 8.0;9.0; ROCm: PYTORCH_ROCM_ARCH, default gfx90a;gfx940)"
fi

install_system_packages
install_python_packages
if [ "$NO_GPU_FOUND" = 1 ] && [ -n "$(torch_gpus)" ]; then  # a GPU only torch sees
  unset BWDCONV_FORCE_CPU
  choose_device_code
  echo "== device code, now that torch is installed: $DEVICE_CODE"
fi
build_extension
