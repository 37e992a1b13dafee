"""Peak memory a region of code adds, on the CPU and on GPUs (docs/DESIGN.md, "Memory").

    with bwdconv.peak_memory("cpu") as peak:
        loss.backward()
    print(peak.bytes)

- CPU: the bytes c10's CPU allocator hands out in the region and that are
  not yet freed, at their highest (a counting allocator in front of c10's
  while a region is open, csrc/ops/memory.cpp).
- GPU: the caching allocator's allocated bytes at their highest
  (torch.cuda.max_memory_allocated, whose peak a region resets) less those
  allocated when the region began.

Regions nest: an enclosing region's peak keeps what an inner one saw. The
counts are per process, every thread's allocations included.
"""

import contextlib
import threading

import torch

from ._library import _C

__all__ = ["peak_memory", "peak_bytes"]


class PeakMemory:
    """The result of a peak_memory region: `bytes`, set when the region ends."""

    def __init__(self, device):
        self.device = device
        self.bytes = None
        self.start = 0
        self.seen = 0  # the highest count before an inner region reset the peak

    def __repr__(self):
        return f"PeakMemory(device={self.device}, bytes={self.bytes})"


class _CpuCounter:
    def open(self):
        _C.start_counting_cpu_bytes()

    def close(self):
        _C.stop_counting_cpu_bytes()

    def live(self):
        return _C.counted_cpu_bytes()

    def peak(self):
        return _C.counted_cpu_peak()

    def reset_peak(self):
        _C.reset_counted_cpu_peak()


class _GpuCounter:
    def __init__(self, device):
        self.device = device

    def open(self):
        pass

    def close(self):
        pass

    def live(self):
        return torch.cuda.memory_allocated(self.device)

    def peak(self):
        return torch.cuda.max_memory_allocated(self.device)

    def reset_peak(self):
        torch.cuda.reset_peak_memory_stats(self.device)


_lock = threading.Lock()
_open = {}  # device -> [PeakMemory, ...], innermost last


def _counter(device):
    return _CpuCounter() if device.type == "cpu" else _GpuCounter(device)


@contextlib.contextmanager
def peak_memory(device="cpu"):
    """The peak bytes the body of a `with` block adds on `device`, in the
    yielded object's `bytes` once the block ends."""
    device = torch.device(device)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    counter = _counter(device)
    region = PeakMemory(device)
    with _lock:
        counter.open()
        regions = _open.setdefault(device, [])
        if regions:
            regions[-1].seen = max(regions[-1].seen, counter.peak())
        counter.reset_peak()
        region.start = region.seen = counter.live()
        regions.append(region)
    try:
        yield region
    finally:
        with _lock:
            regions.remove(region)
            region.bytes = max(region.seen, counter.peak()) - region.start
            counter.close()


def peak_bytes(fn, device):
    """The peak bytes one call of `fn` adds on `device` (its result included)."""
    with peak_memory(device) as peak:
        fn()
    return peak.bytes


def megabytes(count):
    """A byte count as text, in MB (10^6 bytes), three significant digits."""
    return f"{count / 1e6:.3g} MB"
