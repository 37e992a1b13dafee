#!/usr/bin/env bash
# copy_tree.sh ROOT DEST: DEST becomes a copy of ROOT's working tree (git's
# tracked files and the untracked ones it does not ignore), but for DEST's own
# build/, which stays: the files keep their times, so that a build in DEST
# recompiles only what changed (scripts/gpu_wheel.sh, scripts/torch_matrix.sh).
set -euo pipefail
root="$1" dest="$2"
mkdir -p "$dest"
find "$dest" -mindepth 1 -maxdepth 1 ! -name build -exec rm -rf {} +
(cd "$root" && git ls-files -z --cached --others --exclude-standard \
  | xargs -0 sh -c 'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' sh \
  | tar --null -T - -cf -) | tar -C "$dest" -xf -
