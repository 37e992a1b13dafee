"""What enabling bwdconv costs per call: added microseconds and training-step ratios.

    python -m bwdconv.bench.overhead [--samples 27] [--calls 200] [--steps 22] [--json FILE]
                                     [--no-models] [--tuned] [--fixed-heap]

docs/benchmarks.md says what it times. Tiny convolutions and transposed
convolutions (forward under no_grad, and forward + backward; planned aten,
and swap1x1 forced on a stride-2 1x1 so that the call takes bwdconv's op),
then 200 distinct calls in turn and a new input size each call: each sample
times `--calls` calls per mode, the modes in an order drawn at random each
round; a mode's added cost is the median over samples of (mode - without),
with the 25th and 75th percentiles. The training steps (ResNet-18 and MobileNetV2, batch
2, 64x64, float32; also batch 32 at 224x224 on a GPU) and, with --tuned,
held-out shapes go through step_ratios.
"""

import argparse
import contextlib
import functools
import itertools
import math
import statistics

import torch

import bwdconv
from bwdconv._overhead import per_call_seconds, quartiles_us, samples_in_rounds

from . import device as dev
from . import ratios, report
from .cli import tuning_cache

MODES = ("without", "functional", "aten")
# The steps' null comparison: "without" timed again as if it were a mode,
# switch included, so that its ratio (ideally 1) shows what the comparison
# resolves.
NULL = "null"
STEP_MODES = MODES + (NULL,)


@contextlib.contextmanager
def mode(name):
    """bwdconv as `name` says, for the body of a `with` block. The null
    comparison first enters and leaves the functional scope, as the switch
    to a mode does, then runs the body without bwdconv: whatever the switch
    itself leaves behind (the heap, the caches) weighs on it as on the
    modes."""
    if name == NULL:
        with bwdconv.enabled("functional"):
            pass
    if name in ("without", NULL):
        yield
        return
    with bwdconv.enabled(name):
        yield


# torch.nn.functional's names, looked up at each call (enable() replaces them).
KINDS = {"conv": "conv2d", "transposed": "conv_transpose2d"}


def tiny_case(kind, planned, device):
    """(forward, forward_backward, strategy forced or None) for a tiny
    convolution (a 1x1 filter) or transposed convolution (kernel = stride)."""
    transposed = kind == "transposed"
    if planned == "aten":  # the CPU rules plan aten for both
        shape, stride, forced = (1, 2, 4, 4), 1 if not transposed else 2, None
    else:
        shape, stride, forced = (1, 2, 8, 8), 2, "swap1x1"
    x = torch.randn(shape, device=device, requires_grad=True)
    w = torch.randn((2, 4, stride, stride) if transposed else (4, 2, 1, 1), device=device,
                    requires_grad=True)
    name = KINDS[kind]

    def forward():
        with torch.no_grad():
            getattr(torch.nn.functional, name)(x, w, None, stride)

    def forward_backward():
        x.grad = w.grad = None
        getattr(torch.nn.functional, name)(x, w, None, stride).sum().backward()

    return forward, forward_backward, forced


def new_shape_each_call(device, shapes):
    """A forward + backward of a tiny convolution (one channel in, two out,
    a 1x1 filter: planned aten) whose input has sizes not seen before at
    each call, up to `shapes` calls: what a model whose input sizes vary
    pays (no memo, no decision, a plan made per call). The sizes grow by one
    row or column from call to call, so that the modes, alternating, time
    calls of nearly the same work."""
    side = math.isqrt(shapes) + 1
    sizes = itertools.product(range(1, 1 + side), range(1, 1 + side))
    w = torch.randn(2, 1, 1, 1, device=device, requires_grad=True)

    def forward_backward():
        h, width = next(sizes)
        x = torch.randn(1, 1, h, width, device=device, requires_grad=True)
        torch.nn.functional.conv2d(x, w).sum().backward()
    return forward_backward


def distinct_calls_in_turn(device, count=200):
    """A forward + backward of tiny convolutions (planned aten) cycling
    through `count` calls of distinct input sizes, each seen before after the
    warm-up: a model with that many distinct convolutions (the route memo
    holds 512 per thread, csrc/ops/plans.cpp)."""
    w = torch.randn(2, 1, 1, 1, device=device, requires_grad=True)
    inputs = itertools.cycle([torch.randn(1, 1, 5 + i % 20, 5 + i // 20, device=device,
                                          requires_grad=True) for i in range(count)])

    def forward_backward():
        torch.nn.functional.conv2d(next(inputs), w).sum().backward()
    return forward_backward


def _added_us(fn, device, samples, calls, forced=None):
    """(median us per call without bwdconv, {mode: spread of the added us})."""
    def sample(m, _round):
        with mode(m):
            return per_call_seconds(fn, calls, lambda: dev.synchronize(device)) * 1e6

    with bwdconv.force_strategy(forced):
        for m in MODES:  # warm-up: plans, caches, allocator
            sample(m, None)
        per_mode = samples_in_rounds(list(MODES), range(samples), sample)
    added = {m: quartiles_us([a - b for a, b in zip(per_mode[m], per_mode["without"])])
             for m in MODES[1:]}
    return round(statistics.median(per_mode["without"]), 2), added


def tiny_overheads(device, samples, calls):
    """[{kind, planned, pass, without_us, <mode>: {median_us, p25_us, p75_us}}, ...]."""
    results = []
    for kind, planned in itertools.product(KINDS, ("aten", "strategy")):
        forward, forward_backward, forced = tiny_case(kind, planned, device)
        for name, fn in (("forward", forward), ("forward+backward", forward_backward)):
            without_us, added = _added_us(fn, device, samples, calls, forced)
            results.append({
                "kind": kind, "planned": planned if forced is None else f"strategy ({forced} forced)",
                "pass": name, "without_us": without_us, **added})
    for planned, fn in (
            ("aten (200 distinct calls)", distinct_calls_in_turn(device)),
            ("aten (new shape each call)",
             new_shape_each_call(device, (samples + 1) * len(MODES) * calls))):
        without_us, added = _added_us(fn, device, samples, calls)
        results.append({"kind": "conv", "planned": planned, "pass": "forward+backward",
                        "without_us": without_us, **added})
    return results


def _training_models(device):
    import torchvision

    cases = [("resnet18", torchvision.models.resnet18, (2, 3, 64, 64)),
             ("mobilenet_v2", torchvision.models.mobilenet_v2, (2, 3, 64, 64))]
    if device.type == "cuda":
        cases += [(f"{name} (GPU size)", make, (32, 3, 224, 224)) for name, make, _ in cases]
    return cases


def step_ratios(step, device, steps):
    """(without_ms, {mode: bench.ratios.compare's cell}): `step` timed once
    per mode per round, the modes (and the null comparison) in an order
    drawn at random for each round (a fixed rotation would always time one
    mode right after the same other), after two untimed rounds (warm-up,
    and tuning where it is on); each timed step follows an untimed one in the
    same mode, so that no step pays for the switch (the aten scope
    registers kernels with the dispatcher), as a user who enables once
    never does. The cells are bench.ratios.compare's: the ratio of
    medians and the paired ratio, each with its 90% bootstrap interval."""
    rounds = dev.time_in_rounds({m: (step, functools.partial(mode, m)) for m in STEP_MODES},
                                device, [1] * (steps + 2))
    times = {m: t[2:] for m, t in rounds.items()}
    cells = {m: ratios.compare(times["without"], times[m]) for m in STEP_MODES[1:]}
    return round(statistics.median(times["without"]), 3), cells


def training_step_ratios(device, steps):
    """[{model, input, without_ms, <mode>: ratio, ...}]: one optimizer-free
    training step (forward, loss, backward) per mode, alternating."""
    results = []
    for name, make, shape in _training_models(device):
        torch.manual_seed(0)
        model = make().to(device)
        x = torch.randn(shape, device=device)
        target = torch.zeros(shape[0], dtype=torch.long, device=device)

        def step():
            model.zero_grad(set_to_none=True)
            torch.nn.functional.cross_entropy(model(x), target).backward()

        without_ms, cells = step_ratios(step, device, steps)
        results.append({"model": name, "input": list(shape), "without_ms": without_ms, **cells})
    return results


# Held out of every suite in python/bwdconv/bench/suites: (name, make input, make weight,
# stride, padding, dtype, channels_last).
HELD_OUT = [
    ("conv2d 3x3 s2 f32", (8, 32, 56, 56), (64, 32, 3, 3), 2, 1, torch.float32, False),
    ("conv2d 1x1 s2 bf16", (8, 64, 56, 56), (128, 64, 1, 1), 2, 0, torch.bfloat16, False),
    ("conv2d 3x3 s2 f16 NHWC", (4, 64, 32, 32), (128, 64, 3, 3), 2, 1, torch.float16, True),
    ("conv2d 5x5 s2 f32", (8, 16, 64, 64), (32, 16, 5, 5), 2, 2, torch.float32, False),
    ("conv1d k7 s2 f32", (16, 64, 512), (128, 64, 7), 2, 3, torch.float32, False),
    ("conv3d 3x3x3 s2 bf16", (2, 16, 16, 32, 32), (32, 16, 3, 3, 3), 2, 1, torch.bfloat16, False),
    ("conv_transpose2d k2 s2 f32", (8, 64, 28, 28), (64, 32, 2, 2), 2, 0, torch.float32, False),
]


def _held_out_step(case, device):
    _, x_size, w_size, stride, padding, dtype, channels_last = case
    x = torch.randn(x_size, device=device, dtype=dtype, requires_grad=True)
    if channels_last:
        x = x.detach().to(memory_format=torch.channels_last).requires_grad_()
    w = torch.randn(w_size, device=device, dtype=dtype, requires_grad=True)
    name = case[0].split()[0]

    def step():
        x.grad = w.grad = None
        getattr(torch.nn.functional, name)(x, w, None, stride, padding).sum().backward()
    return step


def decisions_of_this_run():
    """Autotuning decisions made and kept for the body of a `with` block only:
    a temporary cache of their own, the user's untouched (bench.cli.tuning_cache)."""
    return tuning_cache(None, None)


def tuned_step_ratios(device, steps, shapes=None):
    """[{shape, without_ms, <mode>: {ratio, ms, tuned}}]: forward + backward
    of held-out shapes (those named in `shapes`, or all), without bwdconv and
    in each scope with autotuning on; the decisions come from this run
    (decisions_of_this_run)."""
    from bwdconv import _tune

    results = []
    with decisions_of_this_run():
        for case in HELD_OUT:
            if shapes and case[0] not in shapes:
                continue
            step = _held_out_step(case, device)
            known = set(_tune.decisions())
            with _tune.autotuning():  # the first round tunes
                without_ms, cells = step_ratios(step, device, steps)
            tuned = {k: e for k, e in _tune.decisions().items() if k not in known}
            results.append({"shape": case[0], "without_ms": without_ms, **cells,
                            "decisions": sorted({f"{g} {d['choice']}" for e in tuned.values()
                                                 for g, d in e["gradients"].items()})})
    return results


def _print_tiny(rows):
    print("tiny convolutions: added us per call over no bwdconv (median [p25, p75])")
    for r in rows:
        cells = "  ".join(f"{m} {r[m]['median_us']:+7.2f} [{r[m]['p25_us']:+.2f}, "
                          f"{r[m]['p75_us']:+.2f}]" for m in MODES[1:])
        print(f"  {r['kind']:10s} {r['planned']:28s} {r['pass']:17s} "
              f"without {r['without_us']:8.2f} us | {cells}")


def _ratio_cells(row):
    return "  ".join(f"{m} {ratios.format_cell(row[m])}" for m in STEP_MODES[1:])


def _print_training(rows):
    print("training steps: median(without) / median(mode), above 1 is faster "
          "[90% bootstrap interval]; paired: the median of the rounds' own ratios [the same]")
    for r in rows:
        print(f"  {r['model']:24s} {'x'.join(map(str, r['input'])):12s} "
              f"without {r['without_ms']:8.2f} ms | {_ratio_cells(r)}")


def _print_tuned(rows):
    print("autotuned forward + backward on held-out shapes: median(without) / median(mode) "
          "[90% bootstrap interval], the decisions tuned")
    for r in rows:
        print(f"  {r['shape']:28s} without {r['without_ms']:8.2f} ms | {_ratio_cells(r)} | "
              f"{', '.join(r['decisions']) or '-'}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=27)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--steps", type=int, default=22)
    dev.add_device_option(parser)
    parser.add_argument("--no-models", action="store_true", help="tiny convolutions only")
    parser.add_argument("--tuned", action="store_true",
                        help="also autotune held-out shapes and time their steps")
    parser.add_argument("--held-out", action="append", metavar="NAME",
                        choices=[case[0] for case in HELD_OUT],
                        help="with --tuned: only this held-out shape (repeatable)")
    dev.add_json_option(parser)
    dev.add_fixed_heap_option(parser)
    args = parser.parse_args(argv)
    if args.held_out and not args.tuned:
        parser.error("--held-out names shapes to tune: it needs --tuned")
    device = torch.device(args.device)
    meta = dev.describe(device, args.fixed_heap)
    print(dev.header(meta))
    result = {"meta": meta}
    if not args.held_out:
        result["tiny"] = tiny_overheads(device, args.samples, args.calls)
        _print_tiny(result["tiny"])
    if not (args.no_models or args.held_out):
        try:
            result["training"] = training_step_ratios(device, args.steps)
            _print_training(result["training"])
        except ImportError:
            print("training steps skipped: torchvision is not installed")
    if args.tuned:
        result["tuned"] = tuned_step_ratios(device, args.steps, args.held_out)
        _print_tuned(result["tuned"])
    report.write_json(args.json, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
