"""What a prebuilt GPU wheel was built from (scripts/gpu_wheel.sh), and
whether the tree the GPU check runs on is the same (scripts/gpu_check.sh).

    python scripts/gpu_wheel_stamp.py write STAMP --wheel W ...   # after a build
    python scripts/gpu_wheel_stamp.py check STAMP [--root DIR]    # exit 0: it matches

The digest covers what the build reads: setup.py, pyproject.toml and every
file under csrc/ and python/ but the build's own outputs (.so, _build.json,
__pycache__, egg-info). `check` says why a wheel does not fit (another digest,
another Python or torch) and exits 1."""

import argparse
import datetime
import hashlib
import json
import os
import platform
import subprocess
import sys

INPUTS = ("setup.py", "pyproject.toml", "setup.cfg", "MANIFEST.in")
TREES = ("csrc", "python")
SKIP_DIRS = {"__pycache__", "build", "dist"}
SKIP_SUFFIXES = (".so", ".pyc", ".pyd", ".o")
SKIP_NAMES = {"_build.json"}


def build_inputs(root):
    """The files the build reads, relative to `root`, sorted."""
    found = [name for name in INPUTS if os.path.isfile(os.path.join(root, name))]
    for tree in TREES:
        for top, dirs, files in os.walk(os.path.join(root, tree)):
            dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.endswith(".egg-info"))
            for f in files:
                if f.endswith(SKIP_SUFFIXES) or f in SKIP_NAMES:
                    continue
                found.append(os.path.relpath(os.path.join(top, f), root))
    return sorted(found)


def digest(root):
    h = hashlib.sha256()
    for name in build_inputs(root):
        h.update(name.encode() + b"\0")
        with open(os.path.join(root, name), "rb") as f:
            h.update(hashlib.sha256(f.read()).digest())
    return h.hexdigest()


def git_revision(root):
    try:
        out = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=root,
                             capture_output=True, text=True, timeout=10)
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def torch_version():
    try:
        import torch
        return torch.__version__
    except ImportError:
        return None


def write(args):
    stamp = {
        "wheel": os.path.basename(args.wheel),
        "digest": digest(args.root),
        "git": git_revision(args.root_git or args.root),
        "python": platform.python_version(),
        "python_tag": f"cp{sys.version_info.major}{sys.version_info.minor}",
        "torch": torch_version(),
        "torch_cuda_arch_list": os.environ.get("TORCH_CUDA_ARCH_LIST"),
        "built": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "build_seconds": args.seconds,
    }
    with open(args.stamp, "w") as f:
        json.dump(stamp, f, indent=1)
    print(json.dumps(stamp))


def check(args):
    """Exit 0 when the stamp's wheel fits this tree, Python and torch."""
    with open(args.stamp) as f:
        stamp = json.load(f)
    reasons = []
    here = digest(args.root)
    if stamp.get("digest") != here:
        reasons.append(f"built from other sources (digest {stamp.get('digest', '?')[:12]}, "
                       f"this tree {here[:12]})")
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    if stamp.get("python_tag") != tag:
        reasons.append(f"built for {stamp.get('python_tag')}, this Python is {tag}")
    torch = torch_version()
    if torch is not None and stamp.get("torch") not in (None, torch):
        reasons.append(f"built against torch {stamp.get('torch')}, this torch is {torch}")
    if reasons:
        print("the wheel does not fit: " + "; ".join(reasons))
        return 1
    print(f"the wheel fits: {stamp['wheel']} (git {stamp.get('git')}, {stamp.get('built')})")
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="verb", required=True)
    w = sub.add_parser("write")
    w.add_argument("stamp")
    w.add_argument("--root", default=".")
    w.add_argument("--root-git", help="where to ask git for the revision (default: --root)")
    w.add_argument("--wheel", required=True)
    w.add_argument("--seconds", type=int)
    c = sub.add_parser("check")
    c.add_argument("stamp")
    c.add_argument("--root", default=".")
    args = parser.parse_args(argv)
    if args.verb == "write":
        write(args)
        return 0
    return check(args)


if __name__ == "__main__":
    sys.exit(main())
