"""The compile cache (--cache DIR): what a compiler step printed and the files
it wrote, stored under a key that covers everything that can change them, so
that an unchanged kernel is not compiled again.

The key is a sha256 over the command line (the compiler's path, its flags and
target; the paths in the run's work directory, a fresh one each run, with the
directory as a placeholder), the compiler's version text, the environment variables that
add flags or pick toolkits (NVCC_*, CUDA*, HIP*, ROCM*, HCC_*), and the
contents of the inputs: for a compile, the source and every file under each
include directory of the command line (coarse, but a header change always
recompiles); for a disassembly, the binary. System headers (CUDA, HIP, the C++
library) enter through the compilers' version texts.

An entry is a directory named by its key, holding stdout, stderr and the
output files; it is written under a temporary name and renamed into place, so
an interrupted run leaves no partial entry under a key.

A run goes through a CompileCache, which notes every key it uses (a hit or a
new entry). After a run that compiled every kernel, prune() removes the
entries that run did not use, so the cache holds the last run's entries and
no more: each change of csrc/ keys every compile anew (every file under the
include directories is an input), and without pruning the entries of each
version of csrc/ would stay, about 113 MB each. Going back to an earlier
version costs one compile of it again.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Callable, Mapping

KEYED_ENVIRONMENT_PREFIXES = ("NVCC_", "CUDA", "HIP", "ROCM", "HCC_")
WORK_PLACEHOLDER = "<work>"
# What prune() may remove: entries (a sha256 under the directory of its first
# two digits) and what an interrupted store left; nothing else a user keeps in DIR.
PREFIX_NAME = re.compile(r"[0-9a-f]{2}")
ENTRY_NAME = re.compile(r"[0-9a-f]{64}|\.partial-.*")


def compile_key(command: list[str], compiler_version: str, environment: Mapping[str, str],
                inputs: Mapping[str, bytes]) -> str:
    """The entry's name: a sha256 over the command, the compiler's version
    text, the keyed environment and the inputs' names and contents."""
    record = {"command": command, "compiler_version": compiler_version,
              "environment": dict(environment),
              "inputs": {name: hashlib.sha256(data).hexdigest() for name, data in inputs.items()}}
    return hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()


def key_command(command: list[str], work: Path) -> list[str]:
    """The command with the work directory as a placeholder in its paths."""
    return [WORK_PLACEHOLDER + arg[len(str(work)):] if arg.startswith(str(work) + os.sep) else arg
            for arg in command]


def keyed_environment(environment: Mapping[str, str]) -> dict[str, str]:
    """The variables that can add compiler flags or choose a toolkit."""
    return {name: value for name, value in environment.items()
            if name.startswith(KEYED_ENVIRONMENT_PREFIXES)}


def include_dirs(command: list[str]) -> list[Path]:
    return [Path(arg[2:]) for arg in command if arg.startswith("-I") and len(arg) > 2]


def source_inputs(source: Path, command: list[str]) -> dict[str, bytes]:
    """The source and every file under the command's include directories."""
    files = {source}
    for directory in include_dirs(command):
        files.update(p for p in directory.rglob("*") if p.is_file())
    return {str(p): p.read_bytes() for p in sorted(files)}


def restore(entry: Path, outputs: list[Path]) -> subprocess.CompletedProcess:
    """Puts a hit's output files in place and gives back what the compiler printed."""
    for output in outputs:
        shutil.copyfile(entry / output.name, output)
    return subprocess.CompletedProcess([], 0, (entry / "stdout").read_text(),
                                       (entry / "stderr").read_text())


def store(entry: Path, outputs: list[Path], result: subprocess.CompletedProcess) -> None:
    """Writes the entry under a temporary name, then renames it into place."""
    entry.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".partial-", dir=entry.parent))
    (staging / "stdout").write_text(result.stdout)
    (staging / "stderr").write_text(result.stderr)
    for output in outputs:
        shutil.copyfile(output, staging / output.name)
    try:
        os.rename(staging, entry)
    except OSError:  # the same entry was stored meanwhile
        shutil.rmtree(staging, ignore_errors=True)


def cached_run(cache: Path, key: str, outputs: list[Path],
               produce: Callable[[], subprocess.CompletedProcess]) -> subprocess.CompletedProcess:
    """The stored result under key, or produce()'s, stored."""
    entry = cache / key[:2] / key
    if entry.is_dir():
        try:
            return restore(entry, outputs)
        except FileNotFoundError:  # removed meanwhile (another run's prune): compile again
            pass
    result = produce()
    store(entry, outputs, result)
    return result


class CompileCache:
    """The cache directory of a run and the keys the run has used; the
    compiles run in threads, so the keys are noted under a lock."""

    def __init__(self, directory: Path):
        self.directory = Path(directory)
        self.used: set[str] = set()
        self._lock = threading.Lock()

    def run(self, key: str, outputs: list[Path],
            produce: Callable[[], subprocess.CompletedProcess]) -> subprocess.CompletedProcess:
        """cached_run in this directory, noting key as used."""
        with self._lock:
            self.used.add(key)
        return cached_run(self.directory, key, outputs, produce)

    def prune(self) -> list[Path]:
        """Removes the entries this run did not use, what interrupted runs
        left half-written and the key prefixes' directories left empty;
        returns what it removed. Other files in the directory stay."""
        removed: list[Path] = []
        if not self.directory.is_dir():
            return removed
        for prefix in sorted(self.directory.iterdir()):
            if not prefix.is_dir() or not PREFIX_NAME.fullmatch(prefix.name):
                continue
            for entry in sorted(prefix.iterdir()):
                if not ENTRY_NAME.fullmatch(entry.name) or entry.name in self.used:
                    continue
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry, ignore_errors=True)
                else:
                    entry.unlink(missing_ok=True)
                removed.append(entry)
            try:
                prefix.rmdir()
            except OSError:  # it still holds entries
                pass
        return removed
