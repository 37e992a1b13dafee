#!/usr/bin/env bash
# The test suite from nothing: setup, then the torch-free layers with CMake
# (GoogleTest under CTest: the planner, the index math, the kernels on the
# host target; csrc/hip compiled by nvcc and hipcc where installed), then
# pytest (the ops, every strategy on the CPU and on the host target,
# gradcheck, opcheck, torch.compile, real models).
#
#   bash scripts/test.sh [--full] [pytest arguments]
#
# The extension pytest loads is built for the device code this machine runs
# (setup.sh --device-code present: none without a GPU). --full (CI, .ci/run)
# adds what proves more than an install: the extension built for every
# device target too (setup.sh --device-code all: the torch glue's device
# code, BWDCONV_WITH_GPU_KERNELS, compiled, linked and tested), the
# host-target kernels under ASan+UBSan and TSan with the planted bugs they
# must report, and the kernel report's rules on every kernel.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=common.sh
source "$ROOT/scripts/common.sh"
BWDCONV_VENV="$(bwdconv_venv)"
device_code=present
full=0
if [ "${1:-}" = --full ]; then
  device_code=all
  full=1
  shift
fi
# Compiler caching where ccache is installed: CMake's C++ compiler through it,
# and setup.py's (torch's ninja build runs c++ from PATH) through its
# masquerading directory. CMake's kernel compiles go without it: the kernel
# report reads files they write beside their objects (CMakeLists.txt).
ccache_flags=(-UCMAKE_CXX_COMPILER_LAUNCHER)
if command -v ccache >/dev/null 2>&1; then
  echo "== ccache: $(command -v ccache) caches the C++ compiles"
  ccache_flags=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  for masquerade in /usr/lib/ccache /usr/lib64/ccache; do
    if [ -x "$masquerade/c++" ]; then
      export PATH="$masquerade:$PATH"
      break
    fi
  done
fi
start=$SECONDS
bash "$ROOT/scripts/setup.sh" --device-code "$device_code"
echo "== setup took $((SECONDS - start)) s"
BUILD="${BWDCONV_CMAKE_BUILD:-$ROOT/build/cmake}"

cmake_flags=(-G Ninja -DBWDCONV_BUILD_TESTS=ON "${ccache_flags[@]}")
if command -v nvcc >/dev/null 2>&1; then
  cmake_flags+=(-DBWDCONV_CUDA=ON -DNVCC_EXECUTABLE="$(command -v nvcc)")
else
  echo "== nvcc not found: csrc/hip is not compiled for CUDA by CMake"
  cmake_flags+=(-DBWDCONV_CUDA=OFF)
fi
if command -v hipcc >/dev/null 2>&1; then
  cmake_flags+=(-DBWDCONV_HIP=ON)
else
  echo "== hipcc not found: csrc/hip is not compiled for ROCm by CMake"
  cmake_flags+=(-DBWDCONV_HIP=OFF)
fi
if [ "$full" = 1 ]; then
  cmake_flags+=(-DBWDCONV_SANITIZERS=ON)
else
  cmake_flags+=(-DBWDCONV_SANITIZERS=OFF)
fi

echo "== cmake: csrc/dispatch + GoogleTest, csrc/hip with the kernel compilers found"
start=$SECONDS
cmake -S "$ROOT" -B "$BUILD" "${cmake_flags[@]}"
# ninja's "[n/m]" lines as they come; the whole log in $BUILD/build.log
run_with_progress "the cmake build" '^\[[0-9]+/[0-9]+\] ' "$BUILD/build.log" \
  cmake --build "$BUILD" -j "$(nproc)" -v
grep -E "^\[[0-9]+/[0-9]+\] .*(nvcc|hipcc)" "$BUILD/build.log" || true  # the kernel compiles run
echo "== cmake build took $((SECONDS - start)) s"

if [ "$full" = 1 ]; then
echo "== kernel report: the rules on csrc/hip's resources, read from the cmake build's kernels"
start=$SECONDS
# Fails on any of its rules (spills, data-movement stack frames, compiler-made
# LDS, data-movement occupancy below 50%), for every kernel.
# It compiles nothing: it reads the objects, ptxas lines and assembly the cmake
# build wrote (kernels/), and disassembles the objects with cuobjdump.
PYTHONUNBUFFERED=1 run_with_progress "the kernel report" '.' "" \
  "$BWDCONV_VENV/bin/python" "$ROOT/scripts/kernel_report.py" --build "$BUILD" \
  --out "$BUILD/kernel-report" --check
echo "== kernel report took $((SECONDS - start)) s ($BUILD/kernel-report/report.md)"
fi

echo "== ctest"
start=$SECONDS
# Each test's line as it ends (and a line every 30 s while a long one runs,
# such as the TSan suite); on a failure the log's end, with the test's output.
(cd "$BUILD" && run_with_progress "ctest" '.' "" ctest --output-on-failure)
if [ "$full" = 1 ]; then
  echo "== what the sanitizers reported for the planted bugs"
  (cd "$BUILD" && ctest -R planted -V 2>&1 | grep -E "ERROR: AddressSanitizer|WARNING: ThreadSanitizer" | sort -u)
fi
echo "== ctest took $((SECONDS - start)) s"

echo "== pytest"
start=$SECONDS
cd "$ROOT"
status=0
# One worker per core (at most 8; pytest-xdist): the tests are independent,
# and those that share a module's built models run in one worker (xdist_group).
workers=$(( $(nproc) < 8 ? $(nproc) : 8 ))
# Each worker, and what it starts, computes on one thread (OMP_NUM_THREADS=1,
# unless set): with a worker per core, PyTorch's OpenMP threads spun on a
# core the other worker held, and the suite took 348 s where it takes 132 s
# (2 cores; docs/engineering.md, "The test command").
# The slowest tests are listed at the end (--durations).
OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" \
  "$BWDCONV_VENV/bin/python" -m pytest tests -q -p no:cacheprovider -n "$workers" \
  --dist loadgroup --durations=15 "$@" || status=$?
echo "== pytest took $((SECONDS - start)) s"
if [ "$full" = 0 ]; then
  echo "== not run here (CI runs them: bash scripts/test.sh --full): the extension for every device"
  echo "   target, the sanitizers' host-kernel suites and the kernel report's rules"
fi
print_how_to_enter "$BWDCONV_VENV"
exit "$status"
