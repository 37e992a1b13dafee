#!/usr/bin/env bash
# The one command for a GPU machine (PyTorch, nvcc and pytest preinstalled, no
# network, no GoogleTest). The default run fits one device call of 6 minutes
# on an H200, installing a prebuilt wheel included:
#
#   build                install the wheel scripts/gpu_wheel.sh built ahead
#                        (build/gpu-wheel/, or BWDCONV_WHEEL=<path>) where its
#                        sources' digest matches this tree and it imports and
#                        runs a kernel; else build here for this GPU
#   gpu_tests            the tests marked gpu (tests/test_gpu.py, test_errors.py)
#   random               >= 10,000 random convolutions and transposed ones,
#                        every forcing x dtype x layout x scope, against float64
#                        (scripts/gpu_random_cases.py)
#   sanitizer_memcheck,  compute-sanitizer over a small case of every strategy
#   sanitizer_racecheck  (scripts/gpu_random_cases.py --small); fails only on
#                        findings in bwdconv's own kernels (scripts/gpu_sanitizer.py).
#                        Both instrument every kernel and name the vendors'
#                        findings; racecheck runs the cases without cuDNN
#                        (--cudnn off: aten's own kernels and cuBLAS), as
#                        cuDNN's large-tile kernels take seconds each under it
#   bench_transposed,    the transposed and seed suites with
#   bench                torch.backends.cudnn.benchmark on for both sides
#                        (python -m bwdconv.bench --cudnn-benchmark on)
#
# and writes benchmarks/results/gpu-<date>/report.md: every step with its
# result and command, what ran and what was skipped. Prints a short summary last.
#
# More steps, outside the default run (BWDCONV_GPU_STEPS names them, "all" is
# every step): bench_channels_last, bound, overhead, tune, kernels,
# kernels_channels_last, kernels_transposed, models, models_bf16.
#
# BWDCONV_GPU_STEPS="build bench ..." runs only the named steps (the others
# keep the result an earlier run left in the same directory, which the report
# marks), so a check can be split over several calls.
# BWDCONV_GPU_BUDGET (seconds, default 345) bounds the whole check: each step
# runs at most its own share (STEP_SECONDS below) and at most what is left; a
# step still running then is stopped and reported as timed out, and the steps
# after a spent budget as skipped, so the report and summary are always written.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
# shellcheck source=common.sh
source scripts/common.sh
PYTHON="${PYTHON:-$(command -v python || command -v python3)}"
BUDGET="${BWDCONV_GPU_BUDGET:-345}"
REPORT_SECONDS=10  # kept back from the budget for the report
OUT="${BWDCONV_GPU_OUT:-benchmarks/results/gpu-$(date -u +%Y-%m-%d)}"
mkdir -p "$OUT"
RUN_ID="$(date -u +%Y%m%dT%H%M%S)-$$"
echo "$RUN_ID" > "$OUT/run.id"
DEFAULT_STEPS=(build gpu_tests random sanitizer_memcheck sanitizer_racecheck bench_transposed bench)
MORE_STEPS=(bench_channels_last bound overhead tune kernels kernels_channels_last kernels_transposed
            models models_bf16)
STEPS=("${DEFAULT_STEPS[@]}" "${MORE_STEPS[@]}")
case "${BWDCONV_GPU_STEPS:-}" in
  "") SELECTED=" ${DEFAULT_STEPS[*]} " ;;
  all) SELECTED=" ${STEPS[*]} " ;;
  *) SELECTED=" $BWDCONV_GPU_STEPS " ;;
esac
# Each step's share of the budget (seconds): the most one step may take, so
# that a hanging step leaves the others their time. The correctness steps come
# first; the benchmarks take what is left, up to their shares (with the wheel,
# about 160 s of an H200's 335).
declare -A STEP_SECONDS=(
  [build]=240 [gpu_tests]=70 [random]=90 [sanitizer_memcheck]=40 [sanitizer_racecheck]=60
  [bench_transposed]=80 [bench]=80 [bench_channels_last]=60 [bound]=30 [overhead]=90
  [tune]=60 [kernels]=40 [kernels_channels_last]=40 [kernels_transposed]=40 [models]=60 [models_bf16]=60)
RANDOM_SECONDS="${BWDCONV_GPU_RANDOM_SECONDS:-70}"
RANDOM_CASES="${BWDCONV_GPU_RANDOM_CASES:-10000}"

# step NAME COMMAND...: runs it (if selected), logs to $OUT/NAME.log, its
# command to NAME.command, its result to NAME.status (with this run's id).
step() {
  local name=$1; shift
  if [[ "$SELECTED" != *" $name "* ]]; then return; fi
  local start=$SECONDS result=passed left=$((BUDGET - REPORT_SECONDS - SECONDS))
  local share=${STEP_SECONDS[$name]:-60}
  echo "$*" > "$OUT/$name.command"
  if [ "$left" -le 0 ]; then
    echo "skipped (the budget of $BUDGET s was spent) $RUN_ID" > "$OUT/$name.status"
    return
  fi
  local limit=$(( share < left ? share : left ))
  echo "== $name (at most $limit s): $*"
  # BWDCONV_STEP_SECONDS: the step's limit, for the scripts that stop
  # themselves in time to write what they found (random, the sanitizers).
  BWDCONV_STEP_SECONDS=$limit timeout --kill-after=10 "$limit" "$@" > "$OUT/$name.log" 2>&1
  case $? in
    0) ;;
    124 | 137) result="TIMED OUT after $limit s" ;;
    *) result=FAILED ;;
  esac
  echo "$result ($((SECONDS - start)) s) $RUN_ID" > "$OUT/$name.status"
  tail -n 3 "$OUT/$name.log"
}

# A step's result as the report shows it: this run's, an earlier run's
# (marked), or why it did not run.
status() {
  local file="$OUT/$1.status" line
  if [ ! -f "$file" ]; then
    if [[ "$SELECTED" == *" $1 "* ]]; then echo "not run"
    else echo "not run (outside this run's steps; BWDCONV_GPU_STEPS=\"$1\" runs it)"; fi
    return
  fi
  line="$(cat "$file")"
  if [[ "$line" == *" $RUN_ID" ]]; then echo "${line% "$RUN_ID"}"
  else echo "${line% *} (an earlier run)"; fi
}
show() { if [ -f "$OUT/$1" ]; then "${@:2}" "$OUT/$1"; else echo "($1: not written: the step did not run or did not finish)"; fi; }

# Device code for the GPU at hand only (unless TORCH_CUDA_ARCH_LIST says
# otherwise): CI compiles every target architecture already.
if [ -z "${TORCH_CUDA_ARCH_LIST:-}" ]; then
  TORCH_CUDA_ARCH_LIST="$("$PYTHON" -c 'import torch
if torch.version.cuda and torch.cuda.is_available():
    print("%d.%d" % torch.cuda.get_device_capability())' 2>/dev/null)"
  [ -n "$TORCH_CUDA_ARCH_LIST" ] && export TORCH_CUDA_ARCH_LIST || unset TORCH_CUDA_ARCH_LIST
fi

# Whether the installed bwdconv imports and, on a GPU, has its kernels and
# runs one (a forced phase, whose interleave is a kernel) to aten's result.
works() {
  "$PYTHON" - <<'PY'
import torch, bwdconv
from bwdconv._library import _C
if torch.cuda.is_available():
    assert _C.gpu_kernels, "bwdconv was built without its GPU kernels"
    x = torch.randn(2, 8, 9, 10, device="cuda")
    w = torch.randn(8, 8, 1, 1, device="cuda")
    dy = torch.randn(2, 8, 5, 5, device="cuda")
    with bwdconv.force_strategy("phase"):
        dx = torch.ops.bwdconv.convolution_backward_input(dy, w, list(x.shape), [2, 2], [0, 0],
                                                          [1, 1], 1)
    ref = torch.ops.aten.convolution_backward(dy.double(), x.double(), w.double(), None, [2, 2],
                                              [0, 0], [1, 1], False, [0, 0], 1,
                                              [True, False, False])[0]
    assert (dx.double() - ref).abs().max().item() < 1e-2, "a forced phase disagrees with aten"
print("bwdconv", bwdconv.__version__, "from", bwdconv.__file__, "- GPU kernels:", _C.gpu_kernels)
PY
}
# The wheel to install: BWDCONV_WHEEL, else build/gpu-wheel/'s for this Python.
wheel() {
  if [ -n "${BWDCONV_WHEEL:-}" ]; then echo "$BWDCONV_WHEEL"; return; fi
  local tag
  tag="$("$PYTHON" -c 'import sys; print("cp%d%d" % sys.version_info[:2])' 2>/dev/null)"
  ls build/gpu-wheel/bwdconv-*-"$tag"-*.whl 2>/dev/null | head -n 1
}
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
# Whether the wheel was built from this tree's sources, by the digest
# gpu_wheel.sh wrote beside it (a wheel without one is tried as it is).
wheel_fits() {
  local record digest revision here
  record="$(dirname "$1")/sources.sha256"
  [ -f "$record" ] || return 0
  read -r digest revision < "$record"
  here="$(build_inputs_digest .)"
  if [ "$digest" != "$here" ]; then
    echo "the wheel does not fit: built from other sources (digest ${digest:0:12}, this tree ${here:0:12})"
    return 1
  fi
  echo "the wheel fits: built from this tree's sources (git $revision)"
}
# The prebuilt wheel where it fits and works, else the build.
install_or_build() {
  local w
  w="$(wheel)"
  if [ -n "$w" ] && [ -f "$w" ]; then
    if ! wheel_fits "$w"; then
      echo "== the prebuilt wheel $w is not this tree's: building here"
    elif "$PYTHON" -m pip install --no-deps --force-reinstall --no-index "$w" && works; then
      echo "== installed the prebuilt wheel $w (not built here)"
      return 0
    else
      echo "== the prebuilt wheel $w did not install, import or run: building here"
    fi
  else
    echo "== no prebuilt wheel (scripts/gpu_wheel.sh builds one; BWDCONV_WHEEL names one): building here"
  fi
  build && works && echo "== built here"
}
export -f install build works wheel wheel_fits build_inputs_digest install_or_build
export PYTHON MAX_JOBS="${MAX_JOBS:-16}"
step build bash -c install_or_build
step gpu_tests "$PYTHON" -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu.py tests/test_errors.py \
  tests/test_autocast.py
# Random calls against float64: the case count, mismatches and what served them.
step random "$PYTHON" scripts/gpu_random_cases.py --cases "$RANDOM_CASES" --seconds "$RANDOM_SECONDS" \
  --require-served --json "$OUT/random.json" --report "$OUT/random.md"
# Findings in bwdconv's kernels fail; the vendors' are counted and named.
# Both instrument every kernel. Racecheck runs the cases without cuDNN, whose
# large-tile kernels under it would take the step's whole share; with
# bwdconv's kernels alone instrumented (--kernel-name kns=bwdconv) it stopped on
# the sanitizer's own error beside the uninstrumented cuDNN kernels
# (benchmarks/results/gpu-2026-11-28-h200). The small cases' accuracy is the
# random step's to judge (--mismatches-pass: printed, not failing the step).
step sanitizer_memcheck "$PYTHON" scripts/gpu_sanitizer.py run --tool memcheck \
  --summary "$OUT/sanitizer_memcheck.md" -- "$PYTHON" scripts/gpu_random_cases.py --small \
  --mismatches-pass
step sanitizer_racecheck "$PYTHON" scripts/gpu_sanitizer.py run --tool racecheck \
  --summary "$OUT/sanitizer_racecheck.md" -- "$PYTHON" scripts/gpu_random_cases.py --small \
  --mismatches-pass --cudnn off
# Decoders' and generators' transposed convolutions, then the seed lines, with
# cuDNN's benchmark mode on for aten and bwdconv alike (the baseline a user
# after speed has): forward (the matching input gradient) and weight gradient.
step bench_transposed "$PYTHON" -m bwdconv.bench --suite transposed --check --iter 20 \
  --cudnn-benchmark on --out "$OUT/bench_transposed"
step bench "$PYTHON" -m bwdconv.bench --suite seeds --check --iter 20 --cudnn-benchmark on \
  --out "$OUT/bench"
# Outside the default run:
# channels_last: cuDNN's preferred layout, and where swap1x1's in_place writer can serve.
step bench_channels_last "$PYTHON" -m bwdconv.bench --suite seeds --layout channels_last \
  --check --iter 20 --cudnn-benchmark on --out "$OUT/bench_channels_last"
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
# The decoders' lines: relayout's transposes (NCHW <-> channels_last) among the walks.
step kernels_transposed "$PYTHON" -m bwdconv.bench.kernels --suite transposed
step models "$PYTHON" -m bwdconv.bench.models
step models_bf16 "$PYTHON" -m bwdconv.bench.models --dtype bfloat16

{
  echo "# bwdconv GPU check"
  echo
  "$PYTHON" - <<'PY'
import datetime, os, subprocess, torch
print(f"- device: {torch.cuda.get_device_name() if torch.cuda.is_available() else 'no GPU'}")
try:
    drv = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout.strip()
except OSError:
    drv = ""
print(f"- driver: {drv or 'unknown'}")
print(f"- torch: {torch.__version__} (CUDA {torch.version.cuda}, HIP {torch.version.hip}, "
      f"cuDNN {torch.backends.cudnn.version()})")
print(f"- TF32 (PyTorch's defaults unless the step sets them): cudnn.allow_tf32 "
      f"{torch.backends.cudnn.allow_tf32}, float32 matmul precision "
      f"{torch.get_float32_matmul_precision()}")
print(f"- date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M UTC}")
compiler = os.environ.get("CXX") or "c++"
version = subprocess.run([compiler, "--version"], capture_output=True, text=True).stdout
print(f"- C++ compiler: {compiler} ({version.splitlines()[0] if version else 'unknown'})")
PY
  # The checkout's .git can lag the files a GPU machine was sent; where the
  # prebuilt wheel fits (the sources' digest matched), its git revision names them.
  echo "- git revision of the checkout: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "- bwdconv: $(grep -hE '^(== (installed|built here|no prebuilt|the prebuilt)|the wheel (fits|does not fit))' "$OUT/build.log" 2>/dev/null | tr '\n' ' ' || true)"
  echo "- budget: $BUDGET s, $SECONDS s used; steps of this run: ${SELECTED# }"
  echo
  ran=() skipped=() other=()
  for name in "${STEPS[@]}"; do
    s="$(status "$name")"
    case "$s" in
      "not run (outside"*) other+=("$name") ;;
      skipped*) skipped+=("$name") ;;
      *"(an earlier run)"|"not run") ;;
      *) ran+=("$name") ;;
    esac
  done
  echo "Ran: ${ran[*]:-none}. Skipped for the budget: ${skipped[*]:-none}. Not in this run: ${other[*]:-none}."
  echo
  echo "| step | result | command |"
  echo "|---|---|---|"
  for name in "${STEPS[@]}"; do
    command="$(cut -c1-200 "$OUT/$name.command" 2>/dev/null)"
    echo "| $name | $(status "$name") | ${command:+\`$command\`} |"
  done
  echo
  echo "## Random calls against float64"; echo; show random.md cat; echo
  echo "## GPU tests"; echo; echo '```'; show gpu_tests.log tail -n 8; echo '```'
  for tool in memcheck racecheck; do
    echo "## compute-sanitizer $tool"; echo; show "sanitizer_$tool.md" cat; echo
    echo '```'; show "sanitizer_$tool.log" grep -E "^- (cases|mismatches):|^  - (out|dx|dw|db) " ; echo '```'
  done
  echo "## Memory (the benchmarks' planned and tuned peaks against aten's)"; echo
  for run in bench bench_channels_last bench_transposed; do
    echo "- $run: $(grep -ho "default memory budget): [0-9]*" "$OUT/$run/report.md" 2>/dev/null \
      || echo "not run")"
  done
  echo; echo "## Transposed convolutions (cudnn.benchmark on)"; echo
  show bench_transposed/report.md sed -n '/^| case/,$p'
  echo; echo "## Seed shapes (cudnn.benchmark on)"; echo
  show bench/report.md sed -n '/^| case/,$p'
  echo; echo "## Seed shapes, channels_last"; echo
  show bench_channels_last/report.md sed -n '/^| case/,$p'
  echo "## Autotuned decisions on the seed shapes"; echo; echo '```'; show tune.log cat; echo '```'
  echo "## Data-movement kernels (achieved bandwidth)"; echo; show kernels.log cat; echo
  echo "### channels_last"; echo; show kernels_channels_last.log cat; echo
  echo "### Transposed convolutions (relayout's transposes among them)"; echo
  show kernels_transposed.log cat; echo
  echo "## Per-call cost of enabling bwdconv"; echo; echo '```'; show overhead.log cat; echo '```'
  echo "## Models (backward, aten vs bwdconv)"; echo; echo '```'
  show models.log cat; show models_bf16.log cat; echo '```'
  echo; echo "### Kernel = stride against GEMM + one write"; echo; echo '```'
  show bound.log cat; echo '```'
} > "$OUT/report.md"

echo
echo "== summary ($OUT/report.md, $SECONDS s)"
for name in "${STEPS[@]}"; do
  printf '%-22s %s\n' "$name" "$(status "$name")"
done
