"""What this bwdconv is and how it is set up, for bug reports.

    python -m bwdconv            # or bwdconv-doctor: a readable report
    python -m bwdconv --json     # the same facts as JSON, with stable keys

`report()` gives the facts as a dict; inside a running program it also shows
the scopes and autotuning that program has switched on. Where something is
not known (a build without its _build.json record, the architectures a
GPU-less CPU build would have), the report says so (null in JSON) instead of
guessing.
"""

import argparse
import json
import os
import platform
import sys

import torch

import bwdconv

from . import _cache, _keys, _tune, _variables, _version
from ._library import _C

BUILD_RECORD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_build.json")


def read_build_record(path=BUILD_RECORD):
    """The build's own record of how it was built (setup.py writes it), or None."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def versions():
    return {"bwdconv": bwdconv.__version__, "torch": torch.__version__,
            "torch_required": f"torch>={_version.TORCH_MINIMUM}",
            "torch_cuda": torch.version.cuda, "torch_hip": torch.version.hip,
            "python": platform.python_version()}


def build(record):
    """The extension's build: whether the GPU kernels are compiled in (asked of
    the extension itself), and from the build record the toolchain, the
    kernels' architectures, the flags and the torch it was built against."""
    known = record or {}
    kernels = bool(_C.gpu_kernels)
    return {
        "gpu_kernels": kernels,
        "toolchain": known.get("toolchain"),
        "architectures": known.get("architectures") if kernels else [],
        "debug": known.get("debug"),
        "compile_args": known.get("compile_args"),
        "built_against_torch": known.get("torch"),
        "record": BUILD_RECORD if record is not None else None,
        # torch answers only where CUDA is available: unknown elsewhere
        "torch_arch_list": torch.cuda.get_arch_list() if torch.cuda.is_available() else None,
    }


def device():
    gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] \
        if torch.cuda.is_available() else []
    return {"cpu": _keys.cpu_model(), "threads": torch.get_num_threads(), "gpus": gpus}


def device_prefixes():
    """The key prefixes of the decisions measured on this machine's devices."""
    names = [_keys.device_description("cpu", -1)]
    if torch.cuda.is_available():
        kind = "hip" if torch.version.hip else "cuda"
        names += [_keys.device_description(kind, i) for i in range(torch.cuda.device_count())]
    return [name + " | " for name in names]


def cache():
    """The decisions file: where, whether readable, and how many of its
    entries were measured on this machine's devices, and of those how many
    with this torch and bwdconv (the ones that can apply)."""
    path = _cache.path()
    summary = {"path": path, "exists": os.path.exists(path), "error": None, "entries": 0,
               "this_device": 0, "this_device_and_versions": 0}
    try:
        keys = list(_cache.read_entries(path))
    except _cache.UnreadableFile as why:
        summary["error"] = str(why)
        return summary
    versions_part = f" | torch {torch.__version__} | bwdconv {bwdconv.__version__} | "
    mine = [k for k in keys if k.startswith(tuple(device_prefixes()))]
    summary.update(entries=len(keys), this_device=len(mine),
                   this_device_and_versions=sum(versions_part in k for k in mine))
    return summary


def autotune():
    return {"enabled": bwdconv.is_autotuning(), "budget_seconds": _tune.BUDGET_SECONDS,
            "key_seconds": _tune.KEY_SECONDS}


def report():
    """Every fact the doctor knows, as a dict with stable keys."""
    return {
        "versions": versions(),
        "build": build(read_build_record()),
        "device": device(),
        "scopes": {scope: bwdconv.is_enabled(scope) for scope in ("functional", "aten")},
        "forced_strategy": bwdconv.forced_strategy(),
        "autotune": autotune(),
        "cache": cache(),
        "kernels_on_host": bwdconv.kernels_on_host_enabled(),
        "environment": _variables.in_effect(),
        "bad_settings": list(bwdconv._environment_errors),
    }


def _shown(value):
    if value is None:
        return "unknown"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (list, tuple)):
        return ", ".join(map(str, value)) or "none"
    return str(value)


def _flags(compile_args):
    if not compile_args:
        return "unknown"
    return "; ".join(f"{tool}: {' '.join(flags)}" for tool, flags in compile_args.items()
                     if tool in ("cxx", "nvcc"))


def _torch_arch_line(arch_list):
    if arch_list is None:
        return "unknown (torch lists them where CUDA is available)"
    return _shown(arch_list)


def _kernel_line(b):
    if not b["gpu_kernels"]:
        return "not compiled in (CPU ops and the host target only)"
    return f"compiled in ({_shown(b['toolchain'])}) for {_shown(b['architectures'])}"


def _cache_line(c):
    if c["error"]:
        return f"{c['path']}: unreadable ({c['error']})"
    if not c["exists"]:
        return f"{c['path']}: no file yet"
    return (f"{c['path']}: {c['entries']} entries, {c['this_device']} for this device, "
            f"{c['this_device_and_versions']} of them for this torch and bwdconv")


def _environment_lines(rows):
    if not rows:
        return ["  (no BWDCONV_* variable set)"]
    return [f"  {r['name']}={r['value']}: "
            + (f"{r['meaning']} ({r['read']})" if r["meaning"] else "not a variable bwdconv reads")
            for r in rows]


def text(facts):
    """The report as lines for a terminal."""
    v, b, d, a = facts["versions"], facts["build"], facts["device"], facts["autotune"]
    torch_build = "CPU" if not (v["torch_cuda"] or v["torch_hip"]) else \
        f"CUDA {v['torch_cuda']}" if v["torch_cuda"] else f"ROCm/HIP {v['torch_hip']}"
    return [
        f"bwdconv {v['bwdconv']}, torch {v['torch']} ({torch_build}; supported: "
        f"{v['torch_required']}), python {v['python']}",
        f"built against torch: {_shown(b['built_against_torch'])}"
        + ("" if b["record"] else " (no build record)"),
        f"GPU kernels: {_kernel_line(b)}",
        f"torch's own GPU architectures: {_torch_arch_line(b['torch_arch_list'])}",
        f"debug build: {_shown(b['debug'])}",
        f"compile flags: {_flags(b['compile_args'])}",
        f"device: {d['cpu']}, {d['threads']} threads; GPUs: {_shown(d['gpus'])}",
        "scopes enabled: " + ", ".join(f"{s} {_shown(on)}" for s, on in facts["scopes"].items()),
        f"forced strategy: {facts['forced_strategy'] or 'none'}",
        f"autotuning: {'on' if a['enabled'] else 'off'} (budget {a['budget_seconds']:g} s, "
        f"{a['key_seconds']:g} s per shape)",
        f"decisions cache: {_cache_line(facts['cache'])}",
        f"GPU kernels on the host for CPU tensors: {_shown(facts['kernels_on_host'])}",
        "environment:",
        *_environment_lines(facts["environment"]),
        *(["bad settings (import bwdconv fails until they are fixed):"]
          + [f"  {error}" for error in facts["bad_settings"]] if facts["bad_settings"] else []),
    ]


def parser():
    p = argparse.ArgumentParser(prog="python -m bwdconv", description=__doc__.split("\n\n")[0])
    p.add_argument("--json", action="store_true", help="print the facts as JSON")
    return p


def main(argv=None):
    args = parser().parse_args(argv)
    facts = report()
    if args.json:
        print(json.dumps(facts, indent=2, sort_keys=True))
    else:
        print("\n".join(text(facts)))
    return 1 if facts["bad_settings"] else 0


if __name__ == "__main__":
    sys.exit(main())
