"""Weight transforms done once (docs/DESIGN.md, "Weight transforms").

The input-gradient strategies, and with them every transposed convolution's
forward that bwdconv plans, derive a filter from the weight each call: the
flipped filter with in and out channels swapped (scatter, phase), the phases'
filters stacked into one (phase_stacked), the taps as a GEMM operand
(swap1x1), the weight in channels_last (relayout). Inside
`reuse_weight_transforms()` each is built once per weight and reused while
the weight's version is unchanged: a decoder run for many samples with the
same weights (inference, a diffusion model's many decoder calls) derives
them once.

What changes a weight in place through autograd's view of it (an
optimizer's step, `with torch.no_grad(): w.copy_(...)`,
`load_state_dict`) raises its version, and the next call builds again.
Writes through `w.data` do not: PyTorch counts them for that tensor only,
so inside the block change weights through the weight itself, as PyTorch's
own optimizers do, or leave the block first.
"""

import contextlib

from ._library import _C


@contextlib.contextmanager
def reuse_weight_transforms():
    """Within the block (process-wide, for every thread: backward runs on
    autograd's own threads), bwdconv reuses the filters it derives from a
    weight while that weight's version is unchanged. Blocks nest; leaving
    the outermost frees every kept filter."""
    _C.enter_weight_cache()
    try:
        yield
    finally:
        _C.exit_weight_cache()


def weight_cache_counts():
    """{"hits", "builds", "entries"}: filters reused and built inside
    reuse_weight_transforms since the process began, and those kept now."""
    hits, builds, entries = _C.weight_cache_counts()
    return {"hits": hits, "builds": builds, "entries": entries}
