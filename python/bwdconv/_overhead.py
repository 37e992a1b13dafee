"""What one call costs the caller beyond PyTorch's own, measured once per process.

A functional call whose backward a strategy computes goes through bwdconv's
op and its autograd node, which take more host time per call than PyTorch's
own node; a call planned for aten only pays the plan lookup before it passes
through (docs/DESIGN.md, "Pass-through"). The op's cost is measured against
aten's convolution called the same way (torch.ops from Python), so that the
Python-to-dispatcher step that only the measurement takes cancels: the
router calls the op from C++. The autotuner adds the first to
every candidate strategy's time and the benchmark adds it to its bwdconv and
tuned columns, so that both compare what a user's step pays.

The measurement runs on the calling thread (on a thread of its own the same
calls took about twice as long once the caller had run parallel work: the
second thread's intra-op team competes with the first's), marked as the
tuner's (its calls are neither tuned nor counted as served), with gradients
on and autocast and inference mode off: it is first needed inside a backward
pass, and the caller's state is put back after it.

It runs with one intra-op thread and compares low quantiles. Both sides
run the same tiny convolution, so the work that differs is host work on the
calling thread. With the process's thread team each call's parallel regions
waited for threads that other processes kept busy: on the 2-core
development machine at load 2-6 the former measurement (the median of
paired differences, the process's threads, the op against PyTorch's own
function) read 13-21 us for the op and 0-170 us for the pass-through in
processes seconds apart, and took 6-56 s; this one read 4.5-6.4 us and
1.8-3.1 us in under half a second. Time a preemption takes from a batch
only adds to it, so each side's lower quartile of batch times is its
undisturbed cost.
"""

import contextlib
import functools
import random
import time

import torch

from ._library import _C

# Samples per side, the sides in an order drawn at random each round, and
# calls per sample: about 0.2 s on an idle CPU (15 x 20 had read 1.5 to 6 us
# for the same pass-through).
ROUNDS = 41
CALLS = 30
# Each side's cost is this quantile of its samples (per-call seconds).
QUANTILE = 0.25


def _tiny_call(convolution):
    """One forward and backward of a tiny convolution (1x2x4x4, 1x1 filter)
    through `convolution(x, w)`, on the CPU."""
    x = torch.randn(1, 2, 4, 4, requires_grad=True)
    w = torch.randn(4, 2, 1, 1, requires_grad=True)

    def call():
        x.grad = w.grad = None
        convolution(x, w).sum().backward()
    return call


def per_call_seconds(call, calls=CALLS, synchronize=lambda: None):
    """Seconds per call of `calls` back-to-back calls, timed from one
    synchronize() to the next (a device's queue drained on both sides)."""
    synchronize()
    started = time.perf_counter()
    for _ in range(calls):
        call()
    synchronize()
    return (time.perf_counter() - started) / calls


def samples_in_rounds(names, rounds, sample, enough=lambda samples: False):
    """{name: [sample(name, round), one per round]} for each item of the
    iterable `rounds`, or until enough(samples) after a round: each round
    takes the names in an order drawn at random (seeded: the same orders each
    run), so that none always follows the same other (a fixed rotation keeps
    each after the same neighbour, and a call pays for what the one before it
    left in the caches)."""
    samples = {name: [] for name in names}
    order = random.Random(0)
    for each_round in rounds:
        for name in order.sample(list(names), len(names)):
            samples[name].append(sample(name, each_round))
        if enough(samples):
            break
    return samples


def _measure():
    from . import functional

    original = functional.originals[2]
    sides = {
        "pytorch": _tiny_call(original),
        "pass_through": _tiny_call(lambda x, w: functional.conv2d(x, w)),
        # The op as the router calls it for a planned call, and aten's
        # convolution called the same way: both pay the Python-to-dispatcher
        # step of torch.ops (8-9 us on the development machine) that neither
        # PyTorch's function nor the router's call of the op takes.
        "aten_op": _tiny_call(lambda x, w: torch.ops.aten.convolution.default(
            x, w, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1)),
        "op": _tiny_call(lambda x, w: torch.ops.bwdconv.convolution.default(
            x, w, None, [1, 1], [0, 0], [1, 1], 1)),
    }
    for call in sides.values():  # warm-up
        per_call_seconds(call)
    return costs_from(samples_in_rounds(list(sides), range(ROUNDS),
                                        lambda side, _: per_call_seconds(sides[side])))


def quartiles_us(values_us):
    """{median_us, p25_us, p75_us} of microsecond values (one value: all three)."""
    q1, median, q3 = (round(quantile(values_us, q), 2) for q in (0.25, 0.5, 0.75))
    return {"median_us": median, "p25_us": q1, "p75_us": q3}


def quantile(values, q):
    """The q-quantile of `values` (linear between the order statistics, as
    statistics.quantiles' inclusive method; one value is every quantile)."""
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    below = int(position)
    above = min(below + 1, len(ordered) - 1)
    return ordered[below] + (ordered[above] - ordered[below]) * (position - below)


def costs_from(samples):
    """{"pass_through", "op"} from {side: [seconds per call]}, each side taken
    at its low quantile: the pass-through over PyTorch's function; the op
    over aten's convolution called the same way, plus the router's lookup
    that precedes it in a user's call (the pass-through's cost). At least 0."""
    low = {side: quantile(values, QUANTILE) for side, values in samples.items()}
    pass_through = max(0.0, low["pass_through"] - low["pytorch"])
    return {"pass_through": pass_through,
            "op": max(0.0, low["op"] - low["aten_op"]) + pass_through}


def _measured_here():
    was_tuning = _C.tuning_on_this_thread()
    _C.mark_thread_as_tuning(True)
    try:
        with torch.enable_grad(), torch.inference_mode(False), \
                torch.autocast("cpu", enabled=False), _one_intra_op_thread():
            return _measure()
    finally:
        _C.mark_thread_as_tuning(was_tuning)


@contextlib.contextmanager
def _one_intra_op_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


@functools.lru_cache(maxsize=None)
def call_costs():
    """{"op": seconds, "pass_through": seconds}: the extra time of a tiny
    convolution's forward and backward over PyTorch alone, through bwdconv's
    op and through the pass-through (each side's lower quartile), at least 0."""
    return _measured_here()
