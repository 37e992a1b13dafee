#!/usr/bin/env bash
# The one command for a GPU machine (PyTorch, nvcc and pytest preinstalled, no
# network, no GoogleTest): builds the extension with its kernels, runs the GPU
# tests, compute-sanitizer (memcheck, racecheck) over a small case of every
# strategy, the seed-shape benchmark, the kernels' achieved bandwidth and the
# model backward benchmark, and
# writes benchmarks/results/gpu-<date>/report.md. Prints a short summary last.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PYTHON="${PYTHON:-python}"
OUT="${BWDCONV_GPU_OUT:-benchmarks/results/gpu-$(date -u +%Y-%m-%d)}"
mkdir -p "$OUT"
declare -A STATUS

step() {  # step NAME COMMAND...: runs it, logs to $OUT/NAME.log, records pass/fail
  local name=$1; shift
  local start=$SECONDS
  echo "== $name: $*"
  if "$@" > "$OUT/$name.log" 2>&1; then STATUS[$name]="passed"; else STATUS[$name]="FAILED"; fi
  STATUS[$name]+=" ($((SECONDS - start)) s)"
  tail -n 3 "$OUT/$name.log"
}

step build env MAX_JOBS="${MAX_JOBS:-16}" "$PYTHON" -m pip install --no-build-isolation \
  --no-deps -e .
step gpu_tests "$PYTHON" -m pytest -q -p no:cacheprovider tests/test_gpu.py tests/test_ops.py \
  tests/test_strategies.py
SANITIZER="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
for tool in memcheck racecheck; do
  step "sanitizer_$tool" "$SANITIZER" --tool "$tool" --error-exitcode 1 \
    "$PYTHON" scripts/gpu_small_cases.py
done
step bench "$PYTHON" -m bwdconv.bench --suite seeds --check --out "$OUT/bench"
step kernels "$PYTHON" -m bwdconv.bench.kernels --suite seeds
step models "$PYTHON" -m bwdconv.bench.models
step models_bf16 "$PYTHON" -m bwdconv.bench.models --dtype bfloat16

{
  echo "# bwdconv GPU check"
  echo
  "$PYTHON" - <<'PY'
import datetime, subprocess, torch
print(f"- device: {torch.cuda.get_device_name()}")
drv = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                     capture_output=True, text=True)
print(f"- driver: {drv.stdout.strip() or 'unknown'}")
print(f"- torch: {torch.__version__} (CUDA {torch.version.cuda}, HIP {torch.version.hip}, "
      f"cuDNN {torch.backends.cudnn.version()})")
print(f"- date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M UTC}")
PY
  echo "- git revision: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo
  echo "| step | result |"
  echo "|---|---|"
  for name in build gpu_tests sanitizer_memcheck sanitizer_racecheck bench kernels models models_bf16; do
    echo "| $name | ${STATUS[$name]:-not run} |"
  done
  echo
  echo "## GPU tests"; echo; echo '```'; tail -n 5 "$OUT/gpu_tests.log"; echo '```'
  for tool in memcheck racecheck; do
    echo "## compute-sanitizer $tool"; echo; echo '```'; tail -n 3 "$OUT/sanitizer_$tool.log"; echo '```'
  done
  echo "## Data-movement kernels (achieved bandwidth)"; echo; cat "$OUT/kernels.log"; echo
  echo "## Models (backward, aten vs bwdconv)"; echo; echo '```'
  cat "$OUT/models.log" "$OUT/models_bf16.log"; echo '```'
  echo; echo "## Seed shapes"; echo
  [ -f "$OUT/bench/report.md" ] && sed -n '/^| case/,$p' "$OUT/bench/report.md"
} > "$OUT/report.md"

echo
echo "== summary ($OUT/report.md)"
for name in build gpu_tests sanitizer_memcheck sanitizer_racecheck bench kernels models models_bf16; do
  printf '%-20s %s\n' "$name" "${STATUS[$name]:-not run}"
done
