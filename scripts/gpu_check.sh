#!/usr/bin/env bash
# The one command for a GPU machine (PyTorch, nvcc and pytest preinstalled, no
# network, no GoogleTest): builds the extension with its kernels, runs the GPU
# tests, compute-sanitizer (memcheck, racecheck) over a small case of every
# strategy, the seed-shape benchmark (as given and channels_last), the
# transposed-convolution suite (each with every call's peak memory against
# aten's, and a count of planned or tuned peaks above the default memory
# budget), what enabling bwdconv costs per call and per training step,
# autotuning of the seed shapes (the decisions it measured and verified), the
# kernels' achieved bandwidth and the model backward benchmark, and writes
# benchmarks/results/gpu-<date>/report.md. Prints a short summary last.
#
# BWDCONV_GPU_STEPS="build bench ..." runs only the named steps (the others
# keep the result an earlier run left in the same directory), so the check can
# be split over several calls; the report always covers every step.
# BWDCONV_GPU_BUDGET (seconds, default 540) bounds the whole check: a step
# still running when it is spent is stopped and reported as timed out, the
# steps after it as skipped, so the report and summary are always written.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PYTHON="${PYTHON:-$(command -v python || command -v python3)}"
BUDGET="${BWDCONV_GPU_BUDGET:-540}"
REPORT_SECONDS=20  # kept back from the budget for the report
OUT="${BWDCONV_GPU_OUT:-benchmarks/results/gpu-$(date -u +%Y-%m-%d)}"
mkdir -p "$OUT"
SELECTED=" ${BWDCONV_GPU_STEPS:-} "
STEPS=(build gpu_tests sanitizer_memcheck sanitizer_racecheck bench bench_channels_last
       bench_transposed bound overhead tune kernels kernels_channels_last models models_bf16)

# step NAME COMMAND...: runs it (if selected), logs to $OUT/NAME.log, result to NAME.status
step() {
  local name=$1; shift
  if [ -n "${BWDCONV_GPU_STEPS:-}" ] && [[ "$SELECTED" != *" $name "* ]]; then return; fi
  local start=$SECONDS result=passed left=$((BUDGET - REPORT_SECONDS - SECONDS))
  if [ "$left" -le 0 ]; then
    echo "skipped (budget of $BUDGET s spent)" > "$OUT/$name.status"
    return
  fi
  echo "== $name: $*"
  timeout --kill-after=10 "$left" "$@" > "$OUT/$name.log" 2>&1
  case $? in
    0) ;;
    124 | 137) result="TIMED OUT" ;;
    *) result=FAILED ;;
  esac
  echo "$result ($((SECONDS - start)) s)" > "$OUT/$name.status"
  tail -n 3 "$OUT/$name.log"
}

status() { cat "$OUT/$1.status" 2>/dev/null || echo "not run"; }
show() { if [ -f "$OUT/$1" ]; then "${@:2}" "$OUT/$1"; else echo "($1: not run)"; fi; }

# Device code for the GPU at hand only (unless TORCH_CUDA_ARCH_LIST says
# otherwise): CI compiles every target architecture already.
if [ -z "${TORCH_CUDA_ARCH_LIST:-}" ]; then
  TORCH_CUDA_ARCH_LIST="$("$PYTHON" -c 'import torch
if torch.version.cuda and torch.cuda.is_available():
    print("%d.%d" % torch.cuda.get_device_capability())' 2>/dev/null)"
  [ -n "$TORCH_CUDA_ARCH_LIST" ] && export TORCH_CUDA_ARCH_LIST || unset TORCH_CUDA_ARCH_LIST
fi
# The build; where the compiler in CXX links a libstdc++ of its own into the
# extension (setup.py refuses that build: beside torch's it crashes), once
# more with the g++ on PATH.
install() { "$PYTHON" -m pip install --no-build-isolation --no-deps -e .; }
build() {
  local log status
  log="$(mktemp)"
  install 2>&1 | tee "$log"
  status=${PIPESTATUS[0]}
  if [ "$status" -ne 0 ] && grep -q "holds its own copy of libstdc++" "$log" \
      && command -v g++ > /dev/null; then
    echo "== again with the g++ on PATH: $(command -v g++)"
    CC="$(command -v gcc)" CXX="$(command -v g++)" install
    status=$?
  fi
  rm -f "$log"
  return "$status"
}
export -f install build
export PYTHON MAX_JOBS="${MAX_JOBS:-16}"
step build bash -c build
step gpu_tests "$PYTHON" -m pytest -q -p no:cacheprovider tests/test_gpu.py tests/test_ops.py \
  tests/test_strategies.py tests/test_transposed.py
SANITIZER="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
for tool in memcheck racecheck; do
  step "sanitizer_$tool" "$SANITIZER" --tool "$tool" --error-exitcode 1 \
    "$PYTHON" scripts/gpu_small_cases.py
done
step bench "$PYTHON" -m bwdconv.bench --suite seeds --check --out "$OUT/bench"
# channels_last: cuDNN's preferred layout, and where swap1x1's in_place writer can serve.
step bench_channels_last "$PYTHON" -m bwdconv.bench --suite seeds --layout channels_last \
  --check --iter 20 --out "$OUT/bench_channels_last"
# Decoders' and generators' transposed convolutions: forward (the matching
# input gradient) and weight gradient against aten's own.
step bench_transposed "$PYTHON" -m bwdconv.bench --suite transposed --check --iter 20 \
  --out "$OUT/bench_transposed"
# Their kernel = stride lines against one GEMM (cuBLAS/hipBLAS) plus one write of the output.
step bound "$PYTHON" -m bwdconv.bench.bound --scale 1 --iter 10
# What enable() costs per call (tiny convolutions) and per training step.
step overhead "$PYTHON" -m bwdconv.bench.overhead --samples 15 --json "$OUT/overhead.json"
# Autotuning on this GPU: every seed shape, each candidate verified against
# aten; the decisions (winner, speedup, excluded candidates) go to tune.log and
# the cache file to $OUT/cache.
step tune env BWDCONV_CACHE_DIR="$OUT/cache" "$PYTHON" -m bwdconv.tune --suite seeds
step kernels "$PYTHON" -m bwdconv.bench.kernels --suite seeds
step kernels_channels_last "$PYTHON" -m bwdconv.bench.kernels --suite seeds --layout channels_last
step models "$PYTHON" -m bwdconv.bench.models
step models_bf16 "$PYTHON" -m bwdconv.bench.models --dtype bfloat16

{
  echo "# bwdconv GPU check"
  echo
  "$PYTHON" - <<'PY'
import datetime, os, subprocess, torch
print(f"- device: {torch.cuda.get_device_name()}")
drv = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                     capture_output=True, text=True)
print(f"- driver: {drv.stdout.strip() or 'unknown'}")
print(f"- torch: {torch.__version__} (CUDA {torch.version.cuda}, HIP {torch.version.hip}, "
      f"cuDNN {torch.backends.cudnn.version()})")
print(f"- date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M UTC}")
compiler = os.environ.get("CXX") or "c++"
version = subprocess.run([compiler, "--version"], capture_output=True, text=True).stdout
print(f"- C++ compiler: {compiler} ({version.splitlines()[0] if version else 'unknown'})")
PY
  echo "- git revision: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo
  echo "| step | result |"
  echo "|---|---|"
  for name in "${STEPS[@]}"; do
    echo "| $name | $(status "$name") |"
  done
  echo
  echo "## Memory (the benchmarks' planned and tuned peaks against aten's)"; echo
  for run in bench bench_channels_last bench_transposed; do
    echo "- $run: $(grep -ho "default memory budget): [0-9]*" "$OUT/$run/report.md" 2>/dev/null \
      || echo "not run")"
  done
  echo
  echo "## GPU tests"; echo; echo '```'; show gpu_tests.log tail -n 5; echo '```'
  for tool in memcheck racecheck; do
    echo "## compute-sanitizer $tool"; echo; echo '```'; show "sanitizer_$tool.log" tail -n 3
    echo '```'
  done
  echo "## Autotuned decisions on the seed shapes"; echo; echo '```'; show tune.log cat; echo '```'
  echo "## Data-movement kernels (achieved bandwidth)"; echo; show kernels.log cat; echo
  echo "### channels_last"; echo; show kernels_channels_last.log cat; echo
  echo "## Per-call cost of enabling bwdconv"; echo; echo '```'; show overhead.log cat; echo '```'
  echo "## Models (backward, aten vs bwdconv)"; echo; echo '```'
  show models.log cat; show models_bf16.log cat; echo '```'
  echo; echo "## Seed shapes"; echo
  show bench/report.md sed -n '/^| case/,$p'
  echo; echo "## Seed shapes, channels_last"; echo
  show bench_channels_last/report.md sed -n '/^| case/,$p'
  echo; echo "## Transposed convolutions"; echo
  show bench_transposed/report.md sed -n '/^| case/,$p'
  echo; echo "### Kernel = stride against GEMM + one write"; echo; echo '```'
  show bound.log cat; echo '```'
} > "$OUT/report.md"

echo
echo "== summary ($OUT/report.md, $SECONDS s)"
for name in "${STEPS[@]}"; do
  printf '%-22s %s\n' "$name" "$(status "$name")"
done
