#!/usr/bin/env bash
# The main job from nothing: setup, then a few training steps of a small
# 1D/2D/3D conv net with bwdconv enabled, printing which strategy served each
# layer, on the GPU if there is one.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/setup.sh"
BWDCONV_VENV="${BWDCONV_VENV:-$HOME/.cache/bwdconv/venv}"
cd "$ROOT"
"$BWDCONV_VENV/bin/python" -m bwdconv.demo "$@"
