#!/usr/bin/env bash
# Builds bwdconv without its GPU kernels (BWDCONV_FORCE_CPU=1) against each
# supported torch release from PyPI and runs a smoke subset of pytest.
#
#   bash scripts/torch_matrix.sh              # every supported minor (SUPPORTED below)
#   bash scripts/torch_matrix.sh 2.8.0 2.15.0 # just these releases
#   bash scripts/torch_matrix.sh oldest       # the oldest supported release
#
# Per release, under ~/.cache/bwdconv/matrix/<version>, reused by re-runs:
#   venv/       a virtual environment with that torch and the test tools;
#   src/        a copy of this working tree (git's tracked and untracked,
#               not ignored, files), so every release keeps its own build/
#               and no object file is shared between releases;
#   build.log, test.log.
# Ends with one line per release: build ok/failed, tests passed/failed/
# skipped/xfailed, seconds (the build's and the tests' exclude time spent
# waiting for the pause file; the total includes it and the install). Exits non-zero when any build or test failed.
#
# MAX_JOBS: parallel compile jobs (default: torch's choice).
# BWDCONV_MATRIX_PAUSE_FILE: while this file exists, wait before each install,
#   build and test run (a machine shared with timing measurements).
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MATRIX_DIR="$HOME/.cache/bwdconv/matrix"

# The newest patch of every minor from the declared minimum
# (python/bwdconv/_version.py) to the newest release on PyPI when this list
# was last checked.
SUPPORTED=(2.8.0 2.9.1 2.10.0 2.11.0 2.12.1 2.13.0 2.14.1 2.15.0)
# Whole files, no -k filter (about a minute per release on 2 cores).
SMOKE_TESTS=(tests/test_ops.py tests/test_compat.py tests/test_aten_scope.py tests/test_compile.py
             tests/test_transforms.py tests/test_random_behaviour.py)
# What the build and the smoke tests need besides torch (no torchvision: no smoke test uses it).
TOOLS=(numpy pytest expecttest ninja pybind11 "setuptools<82" wheel tqdm)

wait_for_pause_file() {
  local file="${BWDCONV_MATRIX_PAUSE_FILE:-}"
  while [ -n "$file" ] && [ -e "$file" ]; do
    echo "   ($file exists: waiting)" >&2  # stdout may be a result being read
    sleep 30
  done
}

# The venv of `version`, with exactly that torch (pip changes nothing when it is there).
prepare_venv() {
  local version="$1" venv="$2"
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv" || return 1
  wait_for_pause_file
  "$venv/bin/pip" install -q "torch==$version" "${TOOLS[@]}"
}

build() {
  local venv="$1" src="$2" log="$3"
  # --no-deps: pip must not swap the torch under test for another.
  (cd "$src" && PATH="$venv/bin:$PATH" BWDCONV_FORCE_CPU=1 \
    "$venv/bin/pip" install --no-build-isolation --no-deps --force-reinstall . ) > "$log" 2>&1
}

# Runs the smoke tests from the copy (its python/ is not on the path: the
# installed bwdconv is what they import); prints "passed failed skipped
# xfailed" (failed counts errors too).
smoke_tests() {
  local venv="$1" src="$2" log="$3"
  (cd "$src" && "$venv/bin/python" -m pytest "${SMOKE_TESTS[@]}" -q -p no:cacheprovider) > "$log" 2>&1
  local summary
  summary="$(grep -E "^(=+ )?[0-9]+ (passed|failed|skipped|error)" "$log" | tail -n 1)"
  count() { echo "$summary" | grep -oE "[0-9]+ $1" | grep -oE "^[0-9]+" || echo 0; }
  echo "$(count passed) $(($(count failed) + $(count error))) $(count skipped) $(count xfailed)"
}

run_release() {
  local version="$1" dir="$MATRIX_DIR/$1" start=$SECONDS
  local venv="$dir/venv" src="$dir/src" build_state="failed" tests="not run"
  mkdir -p "$dir"
  echo "== torch $version: environment $venv" >&2
  if ! prepare_venv "$version" "$venv" >&2; then
    echo "torch $version  environment failed  ($((SECONDS - start)) s)"
    return 1
  fi
  echo "== torch $version: building a copy in $src" >&2
  bash "$ROOT/scripts/copy_tree.sh" "$ROOT" "$src"
  wait_for_pause_file
  local build_start=$SECONDS
  if build "$venv" "$src" "$dir/build.log"; then
    build_state="ok"
  else
    grep -E "error|Error" "$dir/build.log" | head -n 20 >&2
  fi
  local build_seconds=$((SECONDS - build_start)) test_start
  local passed=0 failed=0 skipped=0 xfailed=0
  if [ "$build_state" = ok ]; then
    echo "== torch $version: smoke tests" >&2
    wait_for_pause_file
    test_start=$SECONDS
    read -r passed failed skipped xfailed < <(smoke_tests "$venv" "$src" "$dir/test.log")
    tests="$passed passed, $failed failed, $skipped skipped, $xfailed xfailed ($((SECONDS - test_start)) s)"
    grep -E "^(FAILED|ERROR) " "$dir/test.log" >&2
  fi
  echo "torch $version  build $build_state ($build_seconds s)  tests $tests  total $((SECONDS - start)) s"
  [ "$build_state" = ok ] && [ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
}

main() {
  local versions=("$@") lines=() status=0
  [ "${#versions[@]}" -gt 0 ] || versions=("${SUPPORTED[@]}")
  versions=("${versions[@]/#oldest/${SUPPORTED[0]}}")
  local start=$SECONDS
  for version in "${versions[@]}"; do
    local line
    line="$(run_release "$version")" || status=1
    echo "$line" >&2
    lines+=("$line")
  done
  echo "== torch matrix ($((SECONDS - start)) s)"
  printf '%s\n' "${lines[@]}"
  return "$status"
}

# On one line: bash has read all of it before the long run starts, so an edit
# to this file meanwhile does not change what the running copy does next.
main "$@"; exit
