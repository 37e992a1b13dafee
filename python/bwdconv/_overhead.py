"""What one call costs the caller beyond PyTorch's own, measured once per process.

A functional call whose backward a strategy computes goes through bwdconv's
op and its autograd node, which take more host time per call than PyTorch's
own node; a call planned for aten only pays the plan lookup before it passes
through (docs/DESIGN.md, "Pass-through"). The autotuner adds the first to
every candidate strategy's time and the benchmark adds it to its bwdconv and
tuned columns, so that both compare what a user's step pays.

The measurement runs on the calling thread (on a thread of its own the same
calls took about twice as long once the caller had run parallel work: the
second thread's intra-op team competes with the first's), marked as the
tuner's (its calls are neither tuned nor counted as served), with gradients
on and autocast and inference mode off: it is first needed inside a backward
pass, and the caller's state is put back after it.
"""

import functools
import statistics
import time

import torch

from ._library import _C

# Samples per side, the sides alternating, and calls per sample: about 0.2 s
# on a CPU, enough that the median stays within a few tenths of a
# microsecond from one process to the next (15 x 20 had read 1.5 to 6 us
# for the same pass-through).
ROUNDS = 31
CALLS = 50


def _tiny_call(convolution):
    """One forward and backward of a tiny convolution (1x2x4x4, 1x1 filter)
    through `convolution(x, w)`, on the CPU."""
    x = torch.randn(1, 2, 4, 4, requires_grad=True)
    w = torch.randn(4, 2, 1, 1, requires_grad=True)

    def call():
        x.grad = w.grad = None
        convolution(x, w).sum().backward()
    return call


def _per_call_seconds(call):
    started = time.perf_counter()
    for _ in range(CALLS):
        call()
    return (time.perf_counter() - started) / CALLS


def _measure():
    from . import functional

    original = functional.originals[2]
    sides = {
        "pytorch": _tiny_call(original),
        "pass_through": _tiny_call(lambda x, w: functional.conv2d(x, w)),
        # The op as the router calls it for a planned call, plus the
        # Python-to-dispatcher step the router does not take (a little more).
        "op": _tiny_call(lambda x, w: torch.ops.bwdconv.convolution.default(
            x, w, None, [1, 1], [0, 0], [1, 1], 1)),
    }
    samples = {side: [] for side in sides}
    for side, call in sides.items():  # warm-up
        _per_call_seconds(call)
    for index in range(ROUNDS):
        names = list(sides)[index % 3:] + list(sides)[:index % 3]
        for side in names:
            samples[side].append(_per_call_seconds(sides[side]))
    return {side: max(0.0, statistics.median(a - b for a, b in zip(samples[side],
                                                                    samples["pytorch"])))
            for side in ("pass_through", "op")}


def _measured_here():
    was_tuning = _C.tuning_on_this_thread()
    _C.mark_thread_as_tuning(True)
    try:
        with torch.enable_grad(), torch.inference_mode(False), \
                torch.autocast("cpu", enabled=False):
            return _measure()
    finally:
        _C.mark_thread_as_tuning(was_tuning)


@functools.lru_cache(maxsize=None)
def call_costs():
    """{"op": seconds, "pass_through": seconds}: the median extra time of a
    tiny convolution's forward and backward over PyTorch alone, through
    bwdconv's op and through the pass-through, at least 0."""
    return _measured_here()
