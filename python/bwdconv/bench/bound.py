"""Transposed convolutions whose kernel equals their stride, against a bound.

    python -m bwdconv.bench.bound [--suite transposed] [--scale 2] [--dtype D] [--layout L]

With kernel = stride, no padding and dilation 1, the forward is one GEMM and
an interleave of its result (docs/DESIGN.md, "swap1x1"): the bound is that
GEMM (torch.mm on dense operands) plus one write of the output
(docs/benchmarks.md). The entries are timed by bench.device.time_in_rounds.
"""

import argparse
import contextlib
import functools
import math
import statistics

import torch

from . import device as dev
from .cli import DTYPE_NAMES, add_dtype_option, add_layout_option, add_suite_option, cases_from
from .driver import FORWARD, scale_case
from .overhead import decisions_of_this_run
from .run import PLANNED, TUNED, _output_padding, aten_call, forcing, make_operands

ROUNDS = 15


def kernel_equals_stride(case):
    return (case.transposed and case.groups == 1 and tuple(case.filter) == tuple(case.stride)
            and not any(case.padding) and all(d == 1 for d in case.dilation))


def entries(case, device):
    """{name: (fn, context)}: aten, bwdconv as planned and as tuned, the GEMM, the write."""
    x, w, _, args = make_operands(case, device)
    stride, padding, dilation, groups = args
    aten = functools.partial(aten_call, FORWARD, case, args, x, w, None)

    def ours():
        return torch.ops.bwdconv.conv_transpose(x, w, None, stride, padding, _output_padding(case),
                                                groups, dilation)

    rows = torch.randn(x.shape[0] * math.prod(x.shape[2:]), x.shape[1], device=device).to(x.dtype)
    columns = w.reshape(w.shape[0], -1)
    output = aten()
    written = torch.empty_like(output)
    alone = contextlib.nullcontext
    return {"aten": (aten, alone), "planned": (ours, functools.partial(forcing, PLANNED)),
            "tuned": (ours, functools.partial(forcing, TUNED)),
            "gemm": (lambda: torch.mm(rows, columns), alone),
            "write": (lambda: written.fill_(1), alone)}


def measure(case, device, iterations):
    """{name: median ms} over ROUNDS rounds of `iterations` calls each."""
    # One warm-up call each: the tuned entry tunes there.
    samples = dev.time_in_rounds(entries(case, device), device, [iterations] * ROUNDS, warmup=1)
    return {name: statistics.median(s) for name, s in samples.items()}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_suite_option(p)
    p.add_argument("--scale", type=int, default=2)
    p.add_argument("--iter", type=int, default=3, help="calls per entry per round")
    add_dtype_option(p)
    add_layout_option(p)
    dev.add_device_option(p)
    args = p.parse_args(argv)
    args.suite = args.suite or ["transposed"]
    device = torch.device(args.device)
    cases = [scale_case(c, args.scale) for c in cases_from(args, (), DTYPE_NAMES.get(args.dtype))
             if kernel_equals_stride(c)]
    print(dev.header(dev.describe(device), f"scale 1/{args.scale}",
                     f"{ROUNDS} rounds of {args.iter} calls",
                     "bound = GEMM + one write of the output; bound / time"))
    with decisions_of_this_run():
        for case in cases:
            ms = measure(case, device, args.iter)
            bound = ms["gemm"] + ms["write"]
            cells = "  ".join(f"{name} {ms[name]:.3f} ms ({bound / ms[name]:.2f})"
                              for name in ("aten", "planned", "tuned"))
            print(f"{case.label():40s} gemm {ms['gemm']:.3f} + write {ms['write']:.3f} "
                  f"= {bound:.3f} ms | {cells}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
