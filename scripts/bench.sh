#!/usr/bin/env bash
# The main job from nothing: setup, then the benchmark harness on the seed
# shapes on whatever device is there (full size on a GPU, scaled 1/8 on the
# CPU), writing a table, JSON, CSV, a markdown report and a plot to
# benchmarks/out/. Extra arguments go to the harness (python -m bwdconv.bench).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/setup.sh"
BWDCONV_VENV="${BWDCONV_VENV:-$HOME/.cache/bwdconv/venv}"
cd "$ROOT"
"$BWDCONV_VENV/bin/python" -m bwdconv.bench --suite seeds --check "$@"
