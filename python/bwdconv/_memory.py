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

Autotuning's memory budget is here too (docs/tuning.md): how much more than
aten's peak a candidate may take, by default the bytes of the gradient it
writes; BWDCONV_MEMORY_BUDGET or bwdconv.enable(memory_budget=...) sets a byte
count or a factor of aten's peak ("1.5x": at most 1.5 times aten's peak;
parse_memory_budget). aten's peak is PyTorch's own backward's
(pytorch_backward), the candidates' their gradient's call through bwdconv
(peaks), each with the gradient it returns; over_budget names those above.
"""

import contextlib
import math
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


def peaks(calls, device, injected=None):
    """{label: the peak bytes one call of calls[label] adds on `device`, its
    result included; injected(label, measured), when given, replaces each
    measured figure (the tests')."""
    measured = {label: peak_bytes(fn, device) for label, fn in calls.items()}
    return {label: injected(label, peak) if injected else peak
            for label, peak in measured.items()}


def megabytes(count):
    """A byte count as text, in MB (10^6 bytes), three significant digits."""
    return f"{count / 1e6:.3g} MB"


# ---- autotuning's memory budget --------------------------------------------

def parse_memory_budget(value, name="memory_budget"):
    """("gradient", None), ("bytes", n) or ("factor", f) from a memory budget:
    "gradient" (the default: the bytes of the gradient a candidate writes), a
    byte count (an int, or its digits), or a factor of aten's peak ("1.5x": a
    candidate's peak at most 1.5 times aten's)."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return ("bytes", value)
    text = value.strip() if isinstance(value, str) else ""
    if text == "gradient":
        return ("gradient", None)
    if text.isdigit():
        return ("bytes", int(text))
    with contextlib.suppress(ValueError):
        if text.endswith("x") and float(text[:-1]) >= 0:
            return ("factor", float(text[:-1]))
    raise ValueError(f"{name}={value!r}: expected 'gradient', a byte count or a factor of "
                     "aten's peak such as '1.5x'")


def memory_budget_bytes(budget, gradient_sizes, dtype, aten_peak):
    """The bytes a candidate's peak may exceed aten's peak by, for a gradient
    of these sizes in `dtype` (its name: "float32")."""
    kind, value = budget
    if kind == "gradient":
        return math.prod(gradient_sizes) * getattr(torch, dtype).itemsize
    if kind == "bytes":
        return value
    return round((value - 1) * aten_peak)


def over_budget(peaks, budget, rules_peak=0):
    """{label: why} for each label of {label: peak bytes} whose peak exceeds
    both aten's by more than `budget` bytes and `rules_peak`, the peak of the
    plan the rules make (what runs without tuning: tuning never has to give
    up its speed for memory); aten is never among them."""
    within_budget = peaks["aten"] + budget
    why = f"above aten's {megabytes(peaks['aten'])} plus the memory budget {megabytes(budget)}"
    if rules_peak > within_budget:
        why = f"above the rules' plan's {megabytes(rules_peak)}"
    limit = max(within_budget, rules_peak)
    return {label: f"peak {megabytes(peak)} {why}"
            for label, peak in peaks.items() if label != "aten" and peak > limit}


def _operand(sizes, like, layout):
    """An uninitialised operand of these sizes in `layout` ("channels_last" or not)."""
    formats = {4: torch.channels_last, 5: torch.channels_last_3d}
    memory_format = formats.get(len(sizes), torch.contiguous_format) \
        if layout == "channels_last" else torch.contiguous_format
    return torch.empty(sizes, dtype=like.dtype, device=like.device, memory_format=memory_format)


def pytorch_backward(gradient, grad_output, operand, request, args):
    """PyTorch's own convolution_backward for one gradient of a tuning request
    (bwdconv._tune), as a call: the baseline of the memory budget. The operand
    that gradient does not read is allocated here, outside the measured call,
    as the caller's tensor would be."""
    stride, padding, dilation, groups = args
    if gradient == "input":
        input, weight = _operand(request["input_size"], grad_output, request["layout"]), operand
    else:
        input = operand
        weight = _operand(request["weight_size"], grad_output, request["weight_layout"])
    mask = [gradient == "input", gradient == "weight", False]
    return lambda: torch.ops.aten.convolution_backward(
        grad_output, input, weight, None, stride, padding, dilation, False, [0] * len(stride),
        groups, mask)[mask.index(True)]
