"""Timers, device facts and peak figures for the benchmark harness."""

import contextlib
import datetime
import os
import statistics
import subprocess
import time

import torch

from bwdconv._keys import cpu_model
from bwdconv._overhead import samples_in_rounds

# Dense peak throughput (TFLOP/s) by dtype and memory bandwidth (GB/s), from
# the vendors' published specifications. float32 convolutions on NVIDIA use
# TF32 tensor cores by default in PyTorch (torch.backends.cudnn.allow_tf32).
PEAKS = {
    "H200": {"bfloat16": 989, "float16": 989, "float32": 495, "gbps": 4800},
    "H100 PCIe": {"bfloat16": 756, "float16": 756, "float32": 378, "gbps": 2000},
    "H100": {"bfloat16": 989, "float16": 989, "float32": 495, "gbps": 3350},
    "MI300X": {"bfloat16": 1307, "float16": 1307, "float32": 163, "gbps": 5300},
}


def device_peaks(name):
    """The peak figures whose key occurs in the device name (longest key first)."""
    for key in sorted(PEAKS, key=len, reverse=True):
        if key.lower() in name.lower():
            return dict(PEAKS[key], key=key)
    return None


def _first_line_of(command, timeout, cwd=None):
    """The first line `command` prints, or "unknown" where it fails or prints none."""
    try:
        out = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    lines = out.stdout.strip().splitlines()
    return lines[0] if out.returncode == 0 and lines else "unknown"


def git_revision():
    return _first_line_of(["git", "rev-parse", "--short", "HEAD"], timeout=5,
                         cwd=os.path.dirname(os.path.abspath(__file__)))


def add_device_option(parser):
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")


def add_fixed_heap_option(parser):
    parser.add_argument("--fixed-heap", action="store_true",
                        help="fix glibc malloc's mmap and trim thresholds first "
                             "(fix_heap_thresholds), so that the steps take no page faults: "
                             "what a process with a steady heap pays")


def add_json_option(parser):
    parser.add_argument("--json", help="also write the results to this file")


def describe(device, fixed_heap=False):
    """Device, library versions, date and revision, for every result file;
    with `fixed_heap`, glibc's heap thresholds fixed first (fix_heap_thresholds)
    and whether that took."""
    info = {"fixed_heap": fixed_heap and fix_heap_thresholds(),
        "device_type": device.type,
        "torch": torch.__version__,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "git_revision": git_revision(),
        "threads": torch.get_num_threads(),
    }
    if device.type == "cuda":
        info["device"] = torch.cuda.get_device_name(device)
        info["cuda"] = torch.version.cuda
        info["hip"] = torch.version.hip
        info["cudnn"] = torch.backends.cudnn.version()
        info["driver"] = _first_line_of(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], timeout=10)
    else:
        info["device"] = cpu_model()
        info["mkldnn"] = torch.backends.mkldnn.is_available()
        if hasattr(os, "getloadavg"):  # what else ran: timings under load are not results
            info["load_average"] = [f"{load:.2f}" for load in os.getloadavg()]
    return info


def header(meta, *words):
    """The line a bench prints first: the device, torch, threads, date,
    revision and load of `meta` (describe), then `words`."""
    fields = [meta["device"], f"torch {meta['torch']}", f"{meta['threads']} threads",
              meta["date"], f"revision {meta['git_revision']}",
              f"load {meta.get('load_average')}", *words]
    if meta["fixed_heap"]:
        fields.append("fixed heap thresholds")
    return " | ".join(fields)


@contextlib.contextmanager
def backend_flags(tf32=None, cudnn_benchmark=None):
    """For the body: TF32 on or off (cuDNN's allow_tf32 and the float32 matmul
    precision) and torch.backends.cudnn.benchmark; None leaves a setting as it is."""
    cudnn = torch.backends.cudnn
    saved = cudnn.allow_tf32, torch.get_float32_matmul_precision(), cudnn.benchmark
    if tf32 is not None:
        cudnn.allow_tf32 = tf32
        torch.set_float32_matmul_precision("high" if tf32 else "highest")
    if cudnn_benchmark is not None:
        cudnn.benchmark = cudnn_benchmark
    try:
        yield
    finally:
        cudnn.allow_tf32, cudnn.benchmark = saved[0], saved[2]
        torch.set_float32_matmul_precision(saved[1])


def synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_ms(fn, device, warmup, iterations):
    """Per-call times in milliseconds: CUDA events on a GPU, a monotonic clock on the CPU."""
    for _ in range(warmup):
        fn()
    synchronize(device)
    times = []
    for _ in range(iterations):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        else:
            start = time.perf_counter()
            fn()
            times.append((time.perf_counter() - start) * 1e3)
    return times


def time_in_rounds(calls, device, counts, warmup=0):
    """{name: per-call ms} for calls {name: (fn, context)}: `warmup` untimed
    calls of each first (where an entry that tunes, tunes), then round r
    times counts[r] calls of each, the names in an order drawn at random each
    round (bwdconv._overhead.samples_in_rounds), each name's calls
    after one untimed call of its own, inside context() (a fresh context
    manager per round). A fixed rotation kept each name after the same
    neighbour, and the first call after another pays for what that one left
    in the caches: on the CPU, with two calls a round, the bench's planned
    column ran 12 us (15%) behind the same strategy forced on a 0.07 ms line."""
    if warmup:
        for fn, context in calls.values():
            with context():
                time_ms(fn, device, warmup, 0)

    def timed(name, count):
        fn, context = calls[name]
        with context():
            return time_ms(fn, device, 1, count)

    rounds = samples_in_rounds(list(calls), counts, timed)
    return {name: [t for times in per_round for t in times] for name, per_round in rounds.items()}


def summary(times):
    ordered = sorted(times)
    def at(q):
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]
    return {"median_ms": statistics.median(ordered), "p10_ms": at(0.1), "p90_ms": at(0.9)}


def copy_bandwidth_gbps(device, megabytes=256 if torch.cuda.is_available() else 64):
    """Measured device-to-same-device copy bandwidth (read + write bytes / time)."""
    n = megabytes * 2**20 // 4
    src = torch.empty(n, dtype=torch.float32, device=device).fill_(1)
    dst = torch.empty_like(src)
    times = time_ms(lambda: dst.copy_(src), device, warmup=3, iterations=10)
    return 2 * n * 4 / (statistics.median(times) * 1e-3) / 1e9


def fix_heap_thresholds(mmap_threshold=32 << 20, trim_threshold=1 << 30):
    """Fixes glibc malloc's mmap and trim thresholds for this process
    (mallopt), so that its heap stops moving them as blocks come and go.
    With the defaults, c10's CPU allocator gets a process whose page faults
    per step jump between regimes (a few hundred to several thousand) with
    its history, which swamps differences of a percent; fixed, a warm step
    takes none. True when glibc took both values; False elsewhere."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"))
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):
        return False
    m_trim_threshold, m_mmap_threshold = -1, -3  # malloc.h
    return bool(mallopt(m_mmap_threshold, mmap_threshold)) and bool(
        mallopt(m_trim_threshold, trim_threshold))
