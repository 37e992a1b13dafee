#!/usr/bin/env bash
# The main job from nothing: setup, then the benchmark harness on the seed
# shapes on whatever device is there (full size on a GPU, scaled 1/8 on the
# CPU), writing a table, JSON, CSV, a markdown report and a plot to
# benchmarks/out/. Extra arguments go to the harness (python -m bwdconv.bench).
# The extension gets device code for the GPUs on this machine only (or for
# TORCH_CUDA_ARCH_LIST / PYTORCH_ROCM_ARCH where set), none without a GPU;
# the first lines say which. The environment is $BWDCONV_VENV, else the
# active virtual environment, else ~/.cache/bwdconv/venv.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=common.sh
source "$ROOT/scripts/common.sh"
VENV="$(bwdconv_venv)"
bash "$ROOT/scripts/setup.sh" --device-code present
cd "$ROOT"
echo "== the benchmark harness: python -m bwdconv.bench --suite seeds --check $*"
"$VENV/bin/python" -m bwdconv.bench --suite seeds --check "$@"
print_how_to_enter "$VENV"
