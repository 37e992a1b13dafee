"""The strategies' stride-1 sub-convolutions in 3D bfloat16 on the CPU:
PyTorch 2.11's own bfloat16 conv3d there reads memory it never wrote on
shapes with a spatial dim of size 1 (results far off, changing from call to
call) and crashes on others (docs/limitations.md), so bwdconv runs them in
float32. Each conv-based strategy, forced, on such shapes, called several
times, with its kernels on the host target and without: every input gradient
within twice bfloat16's precision (2^-7 of the largest value) of float64
math on the same rounded operands (the wrong results were off by as much as
the values), and in aten's layout. The bound is not aten's own error, as
PyTorch's bfloat16 backward reads unwritten memory on some such shapes too.
Every strategy that computes input gradients is forced; those
whose stride-1 sub-convolution serves these shapes (phase, phase_stacked,
scatter) must serve most of them."""

import contextlib
import random

import pytest
import torch

import bwdconv
from conftest import aten_gradients

# The shape phase_stacked met (bwdconv/_calls.py, KNOWN_CASES):
# its sub-convolution, input (1, 2, 1, 9, 1) and filter (128, 1, 2, 1, 2)
# with padding (1, 0, 1) and groups 2, came out off by up to 6 in PyTorch.
KNOWN = ((1, 8, 1, 3, 5), (2, 4, 5, 1, 5), [4, 1, 4], [2, 3, 0], [1, 1, 1], 2)


def random_shapes(count, seed):
    """conv3d calls with a size-1 spatial dim, odd channels per group, filters
    reaching into the padding, dilation: the region PyTorch gets wrong."""
    rng = random.Random(seed)
    shapes = []
    while len(shapes) < count:
        groups = rng.choice([1, 2, 3])
        stride = [rng.choice([1, 2, 3, 4]) for _ in range(3)]
        filter_ = [rng.randint(1, 4) for _ in range(3)]
        dilation = [rng.choice([1, 1, 2]) for _ in range(3)]
        padding = [rng.randint(0, d * (k - 1)) for k, d in zip(filter_, dilation)]
        size = [rng.choice([1, 1, 2, 5, 9]) for _ in range(3)]
        size[rng.randrange(3)] = 1
        size = [max(s, d * (k - 1) + 1 - 2 * p) for s, k, d, p in zip(size, filter_, dilation, padding)]
        in_per_group = rng.choice([1, 3, 5, 8])
        out_per_group = rng.choice([1, 2, 4])
        x = (rng.randint(1, 2), groups * in_per_group, *size)
        w = (groups * out_per_group, in_per_group, *filter_)
        if any(s > 1 for s in stride):
            shapes.append((x, w, stride, padding, dilation, groups))
    return shapes


INPUT_STRATEGIES = [e.name for e in bwdconv.registry() if "input" in e.gradients and e.name != "aten"]


@pytest.mark.parametrize("on_host", [False, True])
def test_conv3d_bfloat16_sub_convolutions_are_right_on_every_call(on_host):
    shapes = [KNOWN] + random_shapes(12, 3129)
    served = {strategy: 0 for strategy in INPUT_STRATEGIES}
    for index, (x_size, w_size, s, p, d, g) in enumerate(shapes):
        gen = torch.Generator().manual_seed(index)
        x64 = torch.randn(x_size, generator=gen, dtype=torch.float64)
        w64 = torch.randn(w_size, generator=gen, dtype=torch.float64)
        y = torch.ops.aten.convolution(x64, w64, None, s, p, d, False, [0] * 3, g)
        dy64 = torch.randn(y.shape, generator=gen, dtype=torch.float64)
        x, w, dy = x64.bfloat16(), w64.bfloat16(), dy64.bfloat16()
        reference = aten_gradients(dy.double(), x.double(), w.double(), s, p, d, g)[0]
        theirs = aten_gradients(dy, x, w, s, p, d, g)[0]
        bound = 2 ** -7 * reference.abs().max().item()
        for strategy in INPUT_STRATEGIES:
            where = f"{strategy} {(x_size, w_size, s, p, d, g)} on_host={on_host}"
            host = bwdconv.kernels_on_host() if on_host else contextlib.nullcontext()
            bwdconv.reset_served()
            with bwdconv.force_strategy(strategy), host:
                results = [torch.ops.bwdconv.convolution_backward_input(dy, w, list(x_size), s, p,
                                                                        d, g) for _ in range(3)]
            assert all(r.dtype == torch.bfloat16 and r.stride() == theirs.stride()
                       for r in results), where
            if bwdconv.served()["input"].get(strategy, 0) == 0:
                continue  # it gave way to aten, whose results are PyTorch's
            served[strategy] += 1
            errors = [(r.double() - reference).abs().max().item() for r in results]
            assert max(errors) <= bound, (where, errors, bound)
    # phase, phase_stacked and scatter serve nearly every shape (swap1x1
    # needs a filter within the stride; relayout refuses 3D bfloat16 on the CPU).
    assert sorted(served.values())[-3] >= len(shapes) - 2, served
