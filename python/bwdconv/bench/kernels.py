"""Achieved bandwidth of bwdconv's data-movement kernels on a suite's shapes.

    python -m bwdconv.bench.kernels [--suite seeds] [--iterations 20] [--layout channels_last]

For every backward-data case and every input-gradient strategy that serves
it (forced; swap1x1 once per writer that moves data through the
interleave: fused and in_place where both serve), the device time of
the strategy's own kernels (the scatter or interleave walks, relayout's
transposes; for relayout also PyTorch's own copy of the same tensors, the
conversion it replaces) is read from
the profiler, and the bytes that kernel must move (every output element
written once, every value read once) are divided by it. The fraction of the
device's measured copy bandwidth says how close the kernel is to a plain
copy. Needs a GPU.
"""

import argparse
import math

import torch

import bwdconv

from . import device as dev
from .cli import add_layout_option, add_suite_option, cases_from
from .driver import BACKWARD_DATA
from .run import forced_entries, forcing, make_operands


def kernels():
    """{strategy: its kernel's family} for the input-gradient strategies that launch one: the
    walks of a family (its row and dense kernels) are named <family>_..._kernel."""
    return {e.name: e.kernel for e in bwdconv.registry() if "input" in e.gradients and e.kernel}


def matching_convolution(line, device):
    """(case, x, w, dy, args, explanation) of a suite line; a transposed line
    as its matching convolution (its forward is that convolution's input
    gradient)."""
    case = line.as_convolution()
    x, w, dy, args = make_operands(case, device)
    return case, x, w, dy, args, bwdconv.explain(x, w, *args)


def is_kernel_of(event_name, family):
    """Whether a profiler event is one of bwdconv's kernels of `family` (the
    demangled name: bwdconv::hip::(anonymous namespace)::<family>_dense_kernel<...>)."""
    name = event_name.split("<", 1)[0]
    return "bwdconv::hip::" in name and name.rsplit("::", 1)[-1].startswith(f"{family}_") \
        and name.endswith("_kernel")


def relayout_elements(plan, case):
    """Elements relayout's transposes move, each read and written once: two
    operands to channels_last and the gradient back. For the input gradient
    grad_output and the weight there, dx (the input's size) back; for the
    weight gradient grad_output and the input there, dw back: the same count.
    A tensor of one channel or one position is in both layouts at once, and
    nothing moves."""
    def moved(sizes):
        return math.prod(sizes) if sizes[1] > 1 and math.prod(sizes[2:]) > 1 else 0
    return (moved([case.batch, case.out_channels, *plan["output_size"]])
            + moved([case.batch, case.in_channels, *case.input]) + moved(case.weight_size()))


def kernel_bytes(strategy, writer, plan, case, element_size):
    """(bytes the strategy's data-movement kernel must write, bytes it must
    read): its output once, each source element it copies once."""
    computed = sum(case.batch * case.in_channels * math.prod(phase["computed"])
                   for phase in plan["phases"] if not phase["empty"])
    if strategy == "relayout":
        written = read = relayout_elements(plan, case)
    elif strategy == "scatter":  # the padded, zero-inserted buffer from grad_output
        written = case.batch * case.out_channels * math.prod(plan["scatter"]["buffer"])
        read = case.batch * case.out_channels * math.prod(plan["output_size"])
    elif writer == "in_place":  # the GEMM filled the slots: only the holes are zeroed
        written = case.batch * case.in_channels * math.prod(case.input) - computed
        read = 0
    else:  # dx from the computed slots of the non-empty phases
        written = case.batch * case.in_channels * math.prod(case.input)
        read = computed
    return written * element_size, read * element_size


def kernel_ms(fn, family, iterations):
    """Device time per call of the kernels of `family` (every kernel where
    `family` is None); an error where the profiler saw none (a strategy that
    launched none cannot be timed)."""
    fn()
    torch.cuda.synchronize()
    activities = [torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities) as profile:
        for _ in range(iterations):
            fn()
        torch.cuda.synchronize()
    events = [event for event in profile.key_averages() if event.device_time_total > 0
              and (family is None or is_kernel_of(event.key, family))]
    if not events:
        raise RuntimeError(f"the profiler saw no {family} kernel: the strategy launched none")
    return sum(event.device_time_total for event in events) / 1e3 / iterations


def torch_conversions(x, w, dy):
    """What relayout's transposes do, by PyTorch's own copy instead: grad_output
    and the weight to channels_last, a dx-shaped channels_last tensor back."""
    last = torch.channels_last if dy.dim() == 4 else torch.channels_last_3d
    dx = torch.empty_like(x, memory_format=last)

    def convert():
        dy.contiguous(memory_format=last)
        w.contiguous(memory_format=last)
        dx.contiguous()
    return convert


def measure(line, iterations, copy_gbps):
    """The rows of a suite line (matching_convolution)."""
    case, x, w, dy, args, explanation = matching_convolution(line, torch.device("cuda"))
    plan = explanation.to_dict()

    def call():
        return torch.ops.bwdconv.convolution_backward_input(dy, w, list(x.shape), *args)

    rows = []
    names = kernels()
    for name, fn, forced in forced_entries(explanation, "input", call, list(names)):
        strategy, writer = forced
        kernel = names[strategy]
        with forcing(forced):
            ms = kernel_ms(fn, kernel, iterations)
        moved = sum(kernel_bytes(strategy, writer, plan, case, dy.element_size()))
        gbps = moved / (ms * 1e-3) / 1e9
        rows.append((line.label(), name, kernel, ms * 1e3, gbps, gbps / copy_gbps))
        if strategy == "relayout":  # the same bytes by PyTorch's copy, for comparison
            ms = kernel_ms(torch_conversions(x, w, dy), None, iterations)
            gbps = moved / (ms * 1e-3) / 1e9
            rows.append((line.label(), "torch contiguous()", "copy", ms * 1e3, gbps,
                         gbps / copy_gbps))
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m bwdconv.bench.kernels",
                                description=__doc__.split("\n")[0])
    add_suite_option(p)
    p.add_argument("--iterations", type=int, default=20)
    add_layout_option(p)
    args = p.parse_args(argv)
    args.suite = args.suite or ["seeds"]
    if not torch.cuda.is_available():
        raise SystemExit("bwdconv.bench.kernels needs a GPU: it reads kernel times from the profiler")
    device = torch.device("cuda")
    copy_gbps = dev.copy_bandwidth_gbps(device)
    print(f"{torch.cuda.get_device_name()} | copy bandwidth {copy_gbps:.1f} GB/s")
    print("| case | strategy | kernel | time (us) | GB/s | of copy bandwidth |")
    print("|---|---|---|---|---|---|")
    for case in cases_from(args):
        if not case.as_convolution().directions & BACKWARD_DATA:
            continue
        for label, strategy, kernel, us, gbps, fraction in measure(
                case, args.iterations, copy_gbps):
            print(f"| {label} | {strategy} | {kernel} | {us:.1f} | {gbps:.0f} "
                  f"| {fraction:.0%} |", flush=True)


if __name__ == "__main__":
    main()
