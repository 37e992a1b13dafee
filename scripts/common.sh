# shellcheck shell=bash
# Shared by setup.sh, bench.sh and test.sh (sourced, not run): the virtual
# environment they use, progress for long steps, the device code the main
# job builds, and how to enter the environment afterwards; by gpu_wheel.sh and
# gpu_check.sh: the digest of a build's sources.

DEFAULT_VENV="$HOME/.cache/bwdconv/venv"

# The virtual environment: $BWDCONV_VENV, else the active one ($VIRTUAL_ENV),
# else ~/.cache/bwdconv/venv.
bwdconv_venv() {
  if [ -n "${BWDCONV_VENV:-}" ]; then
    echo "$BWDCONV_VENV"
  elif [ -n "${VIRTUAL_ENV:-}" ]; then
    echo "$VIRTUAL_ENV"
  else
    echo "$DEFAULT_VENV"
  fi
}

# The last lines of a script: how to use what it made.
print_how_to_enter() {
  local venv="$1"
  if [ -n "${VIRTUAL_ENV:-}" ] && [ "$(cd "$VIRTUAL_ENV" 2>/dev/null && pwd -P)" = "$(cd "$venv" 2>/dev/null && pwd -P)" ]; then
    echo "== bwdconv is installed in the active environment $venv: python -m bwdconv says what it has"
  else
    echo "== bwdconv is installed in $venv; to use it (python -m bwdconv, bwdconv-doctor, import bwdconv):"
    echo "   source $venv/bin/activate"
  fi
}

# The digest of what a build reads in the tree DIR: setup.py, pyproject.toml
# and every file under csrc/ and python/ but the build's own outputs (.so,
# _build.json, __pycache__, egg-info), names and contents. gpu_wheel.sh
# writes it beside the wheel it builds; gpu_check.sh installs that wheel only
# where its tree's digest is the same.
build_inputs_digest() {
  (cd "$1" && find setup.py pyproject.toml csrc python \( -name __pycache__ -o -name '*.egg-info' \) \
      -prune -o -type f ! -name '*.so' ! -name _build.json -print0 \
    | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -d' ' -f1)
}

# One line of a build log as a progress line: "[n/m] compiler source" for a
# ninja line (torch's and CMake's print the whole command), else the line
# itself, cut at 160 characters.
short_progress_line() {
  awk -v root="${ROOT:-}/" '
    { sub(/^[ \t]+/, "") }
    match($0, /^\[[0-9]+\/[0-9]+\]/) {
      head = substr($0, 1, RLENGTH); n = split(substr($0, RLENGTH + 1), w, " ")
      source = ""; tool = w[1]; sub(/.*\//, "", tool)
      for (i = 1; i < n; i++) if (w[i] == "-c") source = w[i + 1]
      if (source != "") {
        if (index(source, root) == 1) source = substr(source, length(root) + 1)
        print head " " tool " " source; next
      }
    }
    { print substr($0, 1, 160) }'
}

# run_with_progress LABEL PATTERN LOG COMMAND...
# Runs COMMAND with its output in LOG (a temporary file where LOG is empty,
# removed after a success). Every 2 s it prints the new lines that match
# PATTERN (an extended regex), shortened (short_progress_line), and where
# none came for 30 s (progress_every) a line that says the step still runs. On failure it
# prints the log's last 150 lines and returns COMMAND's status.
run_with_progress() {
  local label="$1" pattern="$2" log="$3" keep=1
  shift 3
  if [ -z "$log" ]; then
    log="$(mktemp "${TMPDIR:-/tmp}/bwdconv-XXXXXX")"
    keep=0
  fi
  : >"$log"
  local start=$SECONDS last=$SECONDS seen=0 total new status=0 every="${progress_every:-30}"
  "$@" >"$log" 2>&1 &
  local pid=$!
  while :; do
    local running=1
    kill -0 "$pid" 2>/dev/null || running=0
    total=$(wc -l <"$log")
    if [ "$total" -gt "$seen" ]; then
      new="$(sed -n "$((seen + 1)),${total}p" "$log" | grep -E -- "$pattern" | short_progress_line || true)"
      seen=$total
      if [ -n "$new" ]; then
        printf '%s\n' "$new" | sed 's/^/   /'
        last=$SECONDS
      fi
    fi
    [ "$running" = 1 ] || break
    if [ $((SECONDS - last)) -ge "$every" ]; then
      echo "   $label: still running, $((SECONDS - start)) s"
      last=$SECONDS
    fi
    sleep $(( every < 2 ? 1 : 2 ))
  done
  wait "$pid" || status=$?
  if [ "$status" -ne 0 ]; then
    echo "== $label failed (exit status $status) after $((SECONDS - start)) s; the last lines of $log:"
    tail -n 150 "$log"
    return "$status"
  fi
  [ "$keep" = 1 ] || rm -f "$log"
  return 0
}

# The device code of the main job's build (setup.sh --device-code present):
# for the GPUs on this machine, or for the architectures the user asked for
# (TORCH_CUDA_ARCH_LIST, PYTORCH_ROCM_ARCH), and none without a GPU (the
# CPU-only build, BWDCONV_FORCE_CPU=1: the C++ ops with the host-target
# kernels). Exports what setup.py reads, sets DEVICE_CODE to a sentence
# saying which and NO_GPU_FOUND to 1 where it found none. PYTHON, where set, is asked too (torch.cuda): it finds GPUs
# that nvidia-smi and rocminfo do not (a container without them).
nvidia_gpus() {  # "name|capability" per GPU
  command -v nvidia-smi >/dev/null 2>&1 || return 0
  nvidia-smi --query-gpu=name,compute_cap --format=csv,noheader 2>/dev/null \
    | sed -E 's/ *, */|/' | grep -E '\|[0-9]+\.[0-9]+$' || true
}

rocm_gpus() {  # one gfx target per GPU
  local tool
  for tool in rocm_agent_enumerator /opt/rocm/bin/rocm_agent_enumerator; do
    if command -v "$tool" >/dev/null 2>&1; then
      "$tool" 2>/dev/null | grep -E '^gfx[0-9a-f]+$' | grep -v '^gfx000$' || true
      return 0
    fi
  done
  if command -v rocminfo >/dev/null 2>&1; then
    rocminfo 2>/dev/null | grep -oE '\bgfx[0-9a-f]+\b' | grep -v '^gfx000$' | sort -u || true
  fi
}

torch_gpus() {  # "cuda|name|capability" or "hip|name|gfx" per GPU torch sees, with $PYTHON
  [ -n "${PYTHON:-}" ] && [ -x "$PYTHON" ] || return 0
  "$PYTHON" - 2>/dev/null <<'EOF' || true
import torch
kind = "hip" if torch.version.hip else "cuda"
for i in range(torch.cuda.device_count() if torch.cuda.is_available() else 0):
    p = torch.cuda.get_device_properties(i)
    arch = p.gcnArchName.split(":")[0] if kind == "hip" else f"{p.major}.{p.minor}"
    print(f"{kind}|{p.name}|{arch}")
EOF
}

joined_unique() { sort -u | paste -sd ';' -; }

choose_device_code() {
  NO_GPU_FOUND=0
  if [ "${BWDCONV_FORCE_CPU:-0}" = 1 ]; then
    DEVICE_CODE="none, as BWDCONV_FORCE_CPU=1 asks (the C++ ops with the host-target kernels)"
    return 0
  fi
  if [ -n "${TORCH_CUDA_ARCH_LIST:-}" ] || [ -n "${PYTORCH_ROCM_ARCH:-}" ]; then
    DEVICE_CODE="for the architectures asked for: TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-unset}, PYTORCH_ROCM_ARCH=${PYTORCH_ROCM_ARCH:-unset}"
    return 0
  fi
  local found names archs
  found="$(torch_gpus)"
  if [ -n "$found" ]; then
    names="$(printf '%s\n' "$found" | cut -d'|' -f2 | sort -u | paste -sd ',' -)"
    archs="$(printf '%s\n' "$found" | cut -d'|' -f3 | joined_unique)"
    if printf '%s\n' "$found" | grep -q '^hip|'; then
      export PYTORCH_ROCM_ARCH="$archs"
      DEVICE_CODE="ROCm $archs, the GPUs present ($names, seen by torch)"
    else
      export TORCH_CUDA_ARCH_LIST="$archs"
      DEVICE_CODE="CUDA $archs, the GPUs present ($names, seen by torch)"
    fi
    return 0
  fi
  found="$(nvidia_gpus)"
  if [ -n "$found" ]; then
    names="$(printf '%s\n' "$found" | cut -d'|' -f1 | sort -u | paste -sd ',' -)"
    archs="$(printf '%s\n' "$found" | cut -d'|' -f2 | joined_unique)"
    export TORCH_CUDA_ARCH_LIST="$archs"
    DEVICE_CODE="CUDA $archs, the GPUs present ($names, seen by nvidia-smi)"
    return 0
  fi
  archs="$(rocm_gpus | joined_unique)"
  if [ -n "$archs" ]; then
    export PYTORCH_ROCM_ARCH="$archs"
    DEVICE_CODE="ROCm $archs, the GPUs present (seen by rocminfo; built where torch is a ROCm build)"
    return 0
  fi
  export BWDCONV_FORCE_CPU=1
  NO_GPU_FOUND=1
  DEVICE_CODE="none: no GPU found, so the CPU-only build (the C++ ops with the host-target kernels); TORCH_CUDA_ARCH_LIST or PYTORCH_ROCM_ARCH asks for device code"
}
