"""Random shapes timed as a user's step: forward and backward, with and without bwdconv.

    python -m bwdconv.bench.random_steps [--cases 40] [--seed 0] [--rounds 15]
                                         [--classes swap1x1,phase,splitk,...]
                                         [--tuned] [--fixed-heap] [--json FILE]

Each case is drawn from a class of shapes the rules plan a strategy for
(docs/DESIGN.md, "Decisions"), or any strided convolution with --tuned, and
its step timed as bench.overhead.step_ratios times one (docs/benchmarks.md).
"""

import argparse
import contextlib
import math
import random
import time

import torch

import bwdconv
from bwdconv._calls import Geometry, laid_out, served

from . import device as dev
from . import overhead, ratios, report


def _sizes(draw, dims, low, high):
    return [draw.randint(low, high) for _ in range(dims)]


def _swap1x1(draw):
    s = draw.choice([2, 2, 3, 4])
    return dict(dims=2, dtype=torch.bfloat16, n=draw.choice([1, 2, 4, 8, 16]),
                c_in=draw.choice([8, 16, 32, 64, 128, 256, 512]),
                c_out=draw.choice([16, 32, 64, 128, 256, 512, 1024]),
                k=[1, 1], s=[s, s] if draw.random() < 0.7 else [s, draw.choice([2, 3, 4])],
                p=[draw.choice([0, 0, 0, 1]) for _ in range(2)], size=_sizes(draw, 2, 7, 96))


def _phase(draw):
    k = draw.choice([2, 3, 3, 4, 5])
    return dict(dims=2, dtype=torch.float16, channels_last=True, n=draw.choice([1, 2, 4, 8]),
                c_in=draw.choice([32, 64, 128, 256]), c_out=draw.choice([64, 128, 256]),
                k=[k, k], s=[draw.choice([2, 2, 3])] * 2, p=[draw.randint(0, k // 2)] * 2,
                size=_sizes(draw, 2, 8, 64))


def _splitk(draw):
    dims = draw.choice([1, 2, 2, 3])
    groups = draw.choice([1, 1, 1, 2, 4])
    k = [draw.choice([1, 2, 3, 3, 5]) for _ in range(dims)]
    return dict(dims=dims, dtype=torch.float16, channels_last=dims > 1 and draw.random() < 0.5,
                n=draw.choice([1, 2, 4, 8]), groups=groups,
                c_in=groups * draw.choice([4, 8, 16, 32, 64]),
                c_out=groups * draw.choice([4, 8, 16, 32, 64]), k=k,
                s=[draw.choice([1, 1, 2, 3]) for _ in range(dims)],
                d=[draw.choice([1, 1, 1, 2]) for _ in range(dims)],
                p=[draw.randint(0, kk // 2 + 1) for kk in k],
                size=_sizes(draw, dims, 6, {1: 400, 2: 48, 3: 16}[dims]), min_flops=1 << 20)


def _phase_transposed(draw):
    k = draw.choice([2, 3, 4])
    return dict(dims=2, dtype=torch.float16, channels_last=True, transposed=True,
                n=draw.choice([1, 2, 4]), c_in=draw.choice([32, 64, 128, 256]),
                c_out=draw.choice([64, 128, 256]), k=[k, k], s=[2, 2],
                p=[draw.randint(0, k // 2)] * 2, size=_sizes(draw, 2, 8, 40))


def _strided(draw):
    dims = draw.choice([1, 2, 2, 3])
    k = [draw.choice([1, 2, 3, 4]) for _ in range(dims)]
    return dict(dims=dims, dtype=draw.choice([torch.float32, torch.bfloat16, torch.float16]),
                channels_last=dims > 1 and draw.random() < 0.5,
                transposed=draw.random() < 0.3, n=draw.choice([1, 2, 4, 8]),
                c_in=draw.choice([8, 16, 32, 64, 128]), c_out=draw.choice([8, 16, 32, 64, 128]),
                k=k, s=[draw.choice([2, 2, 3]) for _ in range(dims)],
                p=[draw.randint(0, kk // 2) for kk in k],
                size=_sizes(draw, dims, 6, {1: 400, 2: 64, 3: 16}[dims]))


# The rules' classes on the CPU (csrc/dispatch/plan.cpp), each with the
# gradient and strategy the rules plan for it, and any strided convolution
# for --tuned.
CLASSES = {"swap1x1": (_swap1x1, ("input", "swap1x1")),
           "phase": (_phase, ("input", "phase")),
           "splitk": (_splitk, ("weight", "splitk")),
           "phase_transposed": (_phase_transposed, ("input", "phase")),
           "strided": (_strided, None)}
RULES_CLASSES = "swap1x1,phase,splitk,phase_transposed"
DRAWS = 2000


def geometry(case):
    per_group = (case["c_out"] if case["transposed"] else case["c_in"]) // case["groups"]
    first = case["c_in"] if case["transposed"] else case["c_out"]
    return Geometry("transposed" if case["transposed"] else "conv",
                    (case["n"], case["c_in"], *case["size"]), (first, per_group, *case["k"]),
                    case["s"], case["p"], [0] * case["dims"], case["d"], case["groups"])


def _flops(case):
    """2 x the multiply-adds of the forward (each gradient has as many): each
    weight element meets as many products as its gradient sums."""
    shape = geometry(case)
    return 2 * math.prod(shape.w_size) * shape.terms()["dw"]


def planned(case, device):
    """{gradient: strategy} of the rules for `case` on `device`."""
    plan = bwdconv.explain([case["n"], case["c_in"], *case["size"]], geometry(case).w_size,
                           case["s"], case["p"], case["d"], case["groups"], dtype=case["dtype"],
                           channels_last=case["channels_last"], device=device.type,
                           transposed=case["transposed"])
    return {"input": plan.input_strategy, "weight": plan.weight_strategy}


def draw_case(draw, name, max_flops, device, rules=True):
    """A case of class `name` whose output is not empty, whose flops lie in
    the class's range (from 2^18, or its own lower bound) and, with `rules`,
    for which the rules plan the class's strategy on `device`."""
    make, expected = CLASSES[name]
    for _ in range(DRAWS):
        case = {"channels_last": False, "transposed": False, "groups": 1, **make(draw)}
        case.setdefault("p", [0] * case["dims"])
        case.setdefault("d", [1] * case["dims"])
        flops = _flops(case)
        low, high = case.get("min_flops", 1 << 18), case.get("max_flops", max_flops)
        if min(geometry(case).output_spatial()) < 1 or not low <= flops <= high:
            continue
        if rules and expected and planned(case, device)[expected[0]] != expected[1]:
            continue
        return {**case, "class": name, "flops": flops}
    why = (f"that the rules plan {expected[1]} for on {device.type} (with --tuned the "
           f"autotuner decides)" if rules and expected else f"within {max_flops:g} flops")
    raise ValueError(f"no shape of class {name} in {DRAWS} draws {why}")


def case_name(case):
    return (f"{geometry(case)} {str(case['dtype']).split('.')[-1]} "
            f"{'channels_last' if case['channels_last'] else 'NCHW'}")


def make_step(case, device):
    """The step: the functional call (looked up at each call, as enable()
    replaces it), then backward of the sum."""
    shape = geometry(case)
    x = torch.randn(shape.x_size, dtype=case["dtype"], device=device)
    x = laid_out(x, "channels_last" if case["channels_last"] else "contiguous").requires_grad_()
    w = torch.randn(shape.w_size, dtype=case["dtype"], device=device, requires_grad=True)

    def step():
        x.grad = w.grad = None
        shape(x, w, None).sum().backward()
    return step


def served_by(step):
    """{gradient: [strategy, ...]}: what the functional scope serves in one step."""
    bwdconv.reset_served()
    with overhead.mode("functional"):
        step()
    return {gradient: sorted(counts) for gradient, counts in served(bwdconv).items()}


def time_case(case, device, rounds):
    step = make_step(case, device)
    step()
    started = time.perf_counter()
    step()
    # About a few seconds a case: fewer rounds for slow steps, at least 6.
    rounds = max(6, min(rounds, int(1.0 / max(time.perf_counter() - started, 1e-4))))
    served = served_by(step)
    without_ms, cells = overhead.step_ratios(step, device, rounds)
    return {"class": case["class"], "case": case_name(case), "flops": case["flops"],
            "rounds": rounds, "served": served, "without_ms": without_ms, **cells}


def _print_row(row):
    served = "; ".join(f"{g} {'+'.join(s)}" for g, s in row["served"].items() if s)
    print(f"{row['case']}\n    {row['without_ms']:.3f} ms  functional "
          f"{ratios.format_cell(row['functional'])}  aten {row['aten']['ratio']:.3f}  "
          f"null {row['null']['ratio']:.3f}  ({served})", flush=True)


def _summary(rows):
    for mode in ("functional", "aten", "null"):
        values = sorted(r[mode]["ratio"] for r in rows)
        below = sum(r[mode]["ratio_ci90"][1] < 1 for r in rows)
        print(f"{mode}: ratios {values[0]:.3f}-{values[-1]:.3f}, median "
              f"{values[len(values) // 2]:.3f}; {below} of {len(rows)} with the whole 90% "
              f"interval below 1")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=15, help="rounds of a fast step")
    parser.add_argument("--classes", default=None,
                        help=f"comma-separated, of {', '.join(CLASSES)} (default: "
                             f"{RULES_CLASSES}; with --tuned: strided)")
    parser.add_argument("--max-flops", type=float, default=2 ** 29)
    dev.add_device_option(parser)
    parser.add_argument("--tuned", action="store_true",
                        help="autotune each case first (decisions of this run only)")
    dev.add_fixed_heap_option(parser)
    dev.add_json_option(parser)
    args = parser.parse_args(argv)
    names = (args.classes or ("strided" if args.tuned else RULES_CLASSES)).split(",")
    unknown = [n for n in names if n not in CLASSES]
    if unknown:
        parser.error(f"unknown classes {unknown}; known: {', '.join(CLASSES)}")
    device = torch.device(args.device)
    meta = dev.describe(device, args.fixed_heap)
    print(dev.header(meta, f"seed {args.seed}", "tuned" if args.tuned else "the rules"))
    draw = random.Random(args.seed)
    torch.manual_seed(args.seed)
    rows = []
    from bwdconv import _tune

    with overhead.decisions_of_this_run():
        for index in range(args.cases):
            case = draw_case(draw, names[index % len(names)], args.max_flops, device,
                             rules=not args.tuned)
            with _tune.autotuning() if args.tuned else contextlib.nullcontext():
                rows.append(time_case(case, device, args.rounds))
            _print_row(rows[-1])
    _summary(rows)
    report.write_json(args.json, {"meta": meta, "rows": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
