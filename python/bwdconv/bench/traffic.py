"""Memory traffic of bwdconv's kernels, measured from their own accesses on the CPU.

    python -m bwdconv.bench.traffic [--suite seeds] [--scale 8] [--layout channels_last]

Every case of the suite (scaled down) runs each strategy that has a kernel
(scatter, phase, phase_stacked and swap1x1 with each writer for input
gradients; splitk for weight gradients) with the kernels on the host grid
(bwdconv.kernels_on_host), recording every global load and store the kernels
make (csrc/hip/portability.h). Per kernel it prints:
- sector efficiency: the 32-byte sectors a warp (32 lanes) or wavefront (64
  lanes) needs for the distinct bytes of one access, over the sectors it
  touches, for stores and loads separately (100%: fully coalesced);
- stores: bytes stored over the strategy's minimum (its output written once),
  and the bytes stored more than once;
- loads: bytes loaded over the minimum (each input element read once).
These are properties of the kernels' code, the same on any device; no time
is measured.
"""

import argparse
import math

import torch

import bwdconv

from .cli import add_layout_option, read_suite, suite_path
from .driver import BACKWARD_DATA, BACKWARD_WEIGHT, scale_case, with_layout
from .kernels import kernel_elements
from .run import forced_entries, forcing, make_operands

_C = bwdconv._library._C


def recorded(fn):
    """fn() with the kernels on the host grid and their accesses recorded."""
    _C.start_kernel_recording()
    try:
        with bwdconv.kernels_on_host():
            fn()
    finally:
        record = _C.stop_kernel_recording()
    return record


def kernel_strategies(gradient):
    """The registry's strategies for `gradient` that launch a kernel."""
    return [e.name for e in bwdconv.registry() if gradient in e.gradients and e.kernel]


def efficiency(coalescing):
    return coalescing["min_sectors"] / coalescing["sectors"] if coalescing["sectors"] else 1.0


def combined(launches, kind, group):
    """Sectors and minimum sectors of `kind` accesses summed over launches."""
    return {field: sum(launch[kind][group][field] for launch in launches)
            for field in ("sectors", "min_sectors")}


def data_movement_minimum(strategy, writer, plan, case, element_size):
    """(bytes the kernel must store, bytes it must load): its output written
    once, each source element it copies read once."""
    written, read = kernel_elements(strategy, writer, plan, case)
    return written * element_size, read * element_size


def splitk_minimum(kernel, case, plan, element_size):
    """splitk's one kernel, the reduce (its products run on the vendor GEMM),
    reads the fp32 (fp64) partials of its chunks once and writes dw once."""
    weight = math.prod(case.weight_size())
    partial_size = 8 if element_size == 8 else 4
    partials = plan["splitk"]["kernel_path"]["chunks"] * weight * partial_size
    return weight * element_size, partials


def rows_for(label, strategy, record, minimum):
    """One row per kernel of a strategy's recorded launches."""
    rows = []
    for kernel in dict.fromkeys(launch["kernel"] for launch in record["launches"]):
        launches = [launch for launch in record["launches"] if launch["kernel"] == kernel]
        stored = sum(launch["store"]["bytes"] for launch in launches)
        loaded = sum(launch["load"]["bytes"] for launch in launches)
        min_store, min_load = minimum(kernel)
        rows.append({
            "case": label, "strategy": strategy, "kernel": kernel, "launches": len(launches),
            "store_warp": efficiency(combined(launches, "store", "warp")),
            "store_wave": efficiency(combined(launches, "store", "wavefront")),
            "load_warp": efficiency(combined(launches, "load", "warp")),
            "load_wave": efficiency(combined(launches, "load", "wavefront")),
            "stored_over_min": stored / min_store if min_store else None,
            "stored_again": stored - record_distinct_stores(record, launches),
            "loaded_over_min": loaded / min_load if min_load else None,  # None: reads nothing
        })
    return rows


# Kernels each of whose launches writes a tensor of its own (relayout: grad_output,
# the weight, the gradient back). A tensor freed between two launches can be
# allocated again at the same address, so the recording's distinct bytes
# would count a later tensor's stores as the earlier one's written again.
OUTPUT_PER_LAUNCH = {"relayout"}


def record_distinct_stores(record, launches):
    """Distinct bytes the launches stored: the whole recording's when every
    recorded launch is among them and they share their output (several
    launches writing one tensor), else the launches' own."""
    shared_output = launches[0]["kernel"] not in OUTPUT_PER_LAUNCH
    if shared_output and len(launches) == len(record["launches"]):
        return record["distinct_store_bytes"]
    return sum(launch["store"]["distinct_bytes"] for launch in launches)


def strategy_rows(label, explanation, direction, call, minimum):
    """Rows of every kernel strategy for `direction` that serves the case,
    each forced in turn; minimum(forced, kernel) is the (store, load) bytes
    rows_for divides by."""
    gradient = "input" if direction == BACKWARD_DATA else "weight"
    rows = []
    for name, fn, forced in forced_entries(explanation, gradient, call,
                                           kernel_strategies(gradient)):
        with forcing(forced):
            record = recorded(fn)
        rows += rows_for(label, name, record, lambda kernel: minimum(forced, kernel))
    return rows


def measure(line):
    """The rows of a suite line; a transposed line as its matching
    convolution (its forward is that convolution's input gradient)."""
    case = line.as_convolution()
    x, w, dy, (stride, padding, dilation, groups) = make_operands(case, torch.device("cpu"))
    explanation = bwdconv.explain(x, w, stride, padding, dilation, groups)
    plan = explanation.to_dict()
    element_size = dy.element_size()
    rows = []
    if case.directions & BACKWARD_DATA:
        rows += strategy_rows(
            line.label(), explanation, BACKWARD_DATA,
            lambda: torch.ops.bwdconv.convolution_backward_input(
                dy, w, list(x.shape), stride, padding, dilation, groups),
            lambda forced, kernel: data_movement_minimum(*forced, plan, case, element_size))
    if case.directions & BACKWARD_WEIGHT:
        rows += strategy_rows(
            line.label(), explanation, BACKWARD_WEIGHT,
            lambda: torch.ops.bwdconv.convolution_backward_weight(
                dy, x, list(w.shape), stride, padding, dilation, groups),
            lambda forced, kernel: splitk_minimum(kernel, case, plan, element_size)
            if forced[0] == "splitk" else data_movement_minimum(*forced, plan, case, element_size))
    return rows


HEADER = ("| case | strategy | kernel | launches | stores: sectors warp32 / wave64 "
          "| loads: sectors warp32 / wave64 | stored / minimum | bytes stored again "
          "| loaded / minimum |")


def ratio(value):
    """A ratio over a minimum, or "-" where the minimum is nothing (a pass
    that only zeroes reads nothing)."""
    return "-" if value is None else f"{value:.2f}"


def format_row(r):
    return (f"| {r['case']} | {r['strategy']} | {r['kernel']} | {r['launches']} "
            f"| {r['store_warp']:.0%} / {r['store_wave']:.0%} "
            f"| {r['load_warp']:.0%} / {r['load_wave']:.0%} "
            f"| {ratio(r['stored_over_min'])} | {r['stored_again']} "
            f"| {ratio(r['loaded_over_min'])} |")


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m bwdconv.bench.traffic",
                                description=__doc__.split("\n")[0])
    p.add_argument("--suite", default="seeds")
    p.add_argument("--scale", type=int, default=8,
                   help="shrink batch, channels and spatial size by this factor (default 8)")
    add_layout_option(p)
    args = p.parse_args(argv)
    print(f"suite {args.suite}, scaled 1/{args.scale}, layout {args.layout or 'as given'}; "
          "kernels on the host grid (measured on the CPU from the kernels' own accesses)")
    print(HEADER)
    print("|" + "---|" * HEADER.count(" | ") + "---|")
    for case in read_suite(suite_path(args.suite)):
        case = scale_case(with_layout(case, args.layout), args.scale)
        for row in measure(case):
            print(format_row(row), flush=True)


if __name__ == "__main__":
    main()
