#!/usr/bin/env bash
# The whole test suite from nothing: setup, then the torch-free layers with
# CMake (GoogleTest under CTest; csrc/hip compiled by nvcc and hipcc, and for
# the host target, also under sanitizers), then pytest.
#
#   bash scripts/test.sh [--all-targets] [pytest arguments]
#
# The extension pytest loads is built for the device code this machine runs
# (setup.sh --device-code present: none without a GPU), as CMake compiles
# every kernel for CUDA and hipcc with the extension's own device flags.
# --all-targets (CI, .ci/run) builds the extension for every device target
# too (setup.sh --device-code all), which also compiles and links the torch
# glue's device code (BWDCONV_WITH_GPU_KERNELS) and tests that extension.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=common.sh
source "$ROOT/scripts/common.sh"
BWDCONV_VENV="$(bwdconv_venv)"
device_code=present
if [ "${1:-}" = --all-targets ]; then
  device_code=all
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
bash "$ROOT/scripts/setup.sh" --device-code "$device_code"
BUILD="${BWDCONV_CMAKE_BUILD:-$ROOT/build/cmake}"

cmake_flags=(-G Ninja -DBWDCONV_BUILD_TESTS=ON -DBWDCONV_HIP=ON "${ccache_flags[@]}")
if command -v nvcc >/dev/null 2>&1; then
  cmake_flags+=(-DBWDCONV_CUDA=ON -DNVCC_EXECUTABLE="$(command -v nvcc)")
else
  echo "== nvcc not found: csrc/hip is not compiled for CUDA by CMake"
fi

echo "== cmake: csrc/dispatch + GoogleTest, csrc/hip with nvcc and hipcc"
start=$SECONDS
cmake -S "$ROOT" -B "$BUILD" "${cmake_flags[@]}"
# ninja's "[n/m]" lines as they come; the whole log in $BUILD/build.log
run_with_progress "the cmake build" '^\[[0-9]+/[0-9]+\] ' "$BUILD/build.log" \
  cmake --build "$BUILD" -j "$(nproc)" -v
grep -E "^\[[0-9]+/[0-9]+\] .*(nvcc|hipcc)" "$BUILD/build.log" || true  # the kernel compiles run
echo "== cmake build took $((SECONDS - start)) s"

echo "== kernel report: the rules on csrc/hip's resources, read from the cmake build's kernels"
start=$SECONDS
# Fails on any of its rules (spills, data-movement stack frames, compiler-made
# LDS, data-movement occupancy below 50%, splitk's products neither on the
# vendor GEMM nor on tensor cores / MFMA), for every kernel, splitk's reduce included.
# It compiles nothing: it reads the objects, ptxas lines and assembly the cmake
# build wrote (kernels/), and disassembles the objects with cuobjdump.
PYTHONUNBUFFERED=1 run_with_progress "the kernel report" '.' "" \
  "$BWDCONV_VENV/bin/python" "$ROOT/scripts/kernel_report.py" --build "$BUILD" \
  --out "$BUILD/kernel-report" --check all
echo "== kernel report took $((SECONDS - start)) s ($BUILD/kernel-report/report.md)"

echo "== ctest (with the host-target kernels under ASan+UBSan and TSan, and planted bugs they must report)"
# Each test's line as it ends (and a line every 30 s while a long one runs,
# such as the TSan suite); on a failure the log's end, with the test's output.
(cd "$BUILD" && run_with_progress "ctest" '.' "" ctest --output-on-failure)
echo "== what the sanitizers reported for the planted bugs"
(cd "$BUILD" && ctest -R planted -V 2>&1 | grep -E "ERROR: AddressSanitizer|WARNING: ThreadSanitizer" | sort -u)

echo "== pytest"
cd "$ROOT"
status=0
# One worker per core (at most 8; pytest-xdist): the tests are independent,
# and those that share a module's built models run in one worker (xdist_group).
workers=$(( $(nproc) < 8 ? $(nproc) : 8 ))
"$BWDCONV_VENV/bin/python" -m pytest tests -q -p no:cacheprovider -n "$workers" --dist loadgroup \
  "$@" || status=$?
print_how_to_enter "$BWDCONV_VENV"
exit "$status"
