"""Memory traffic of bwdconv's kernels, measured from their own accesses on the CPU.

    python -m bwdconv.bench.traffic [--suite seeds] [--scale 8] [--layout channels_last]

Each strategy with a kernel runs on the host grid (bwdconv.kernels_on_host)
on every line of the suite, scaled down; per kernel, the sector efficiency of
its stores and loads, and the bytes over the strategy's minimum
(docs/benchmarks.md). No time is measured.
"""

import argparse
import math

import torch

import bwdconv

from .cli import add_layout_option, add_suite_option, cases_from
from .driver import BACKWARD_DATA, BACKWARD_WEIGHT, scale_case
from .kernels import kernel_bytes, kernels, matching_convolution
from .run import forced_entries, forcing

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


def efficiency(coalescing):
    return coalescing["min_sectors"] / coalescing["sectors"] if coalescing["sectors"] else 1.0


def combined(launches, kind, group):
    """Sectors and minimum sectors of `kind` accesses summed over launches."""
    return {field: sum(launch[kind][group][field] for launch in launches)
            for field in ("sectors", "min_sectors")}


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
    for name, fn, forced in forced_entries(explanation, gradient, call, list(kernels(gradient))):
        with forcing(forced):
            record = recorded(fn)
        rows += rows_for(label, name, record, lambda kernel: minimum(forced, kernel))
    return rows


def measure(line):
    """The rows of a suite line (bench.kernels.matching_convolution)."""
    case, x, w, dy, args, explanation = matching_convolution(line, torch.device("cpu"))
    plan = explanation.to_dict()
    element_size = dy.element_size()

    def minimum(forced, kernel):
        if forced[0] == "splitk":
            return splitk_minimum(kernel, case, plan, element_size)
        return kernel_bytes(*forced, plan, case, element_size)
    rows = []
    if case.directions & BACKWARD_DATA:
        rows += strategy_rows(line.label(), explanation, BACKWARD_DATA, lambda: torch.ops.bwdconv.
                              convolution_backward_input(dy, w, list(x.shape), *args), minimum)
    if case.directions & BACKWARD_WEIGHT:
        rows += strategy_rows(line.label(), explanation, BACKWARD_WEIGHT, lambda: torch.ops.bwdconv.
                              convolution_backward_weight(dy, x, list(w.shape), *args), minimum)
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
    add_suite_option(p)
    p.add_argument("--scale", type=int, default=8,
                   help="shrink batch, channels and spatial size by this factor (default 8)")
    add_layout_option(p)
    args = p.parse_args(argv)
    args.suite = args.suite or ["seeds"]
    print(f"suite {', '.join(args.suite)}, scaled 1/{args.scale}, layout {args.layout or 'as given'}; "
          "kernels on the host grid (measured on the CPU from the kernels' own accesses)")
    print(HEADER)
    print("|" + "---|" * HEADER.count(" | ") + "---|")
    for case in cases_from(args):
        for row in measure(scale_case(case, args.scale)):
            print(format_row(row), flush=True)


if __name__ == "__main__":
    main()
