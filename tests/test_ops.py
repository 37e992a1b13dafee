"""The bwdconv ops against aten: values, gradcheck, gradgradcheck, opcheck."""

import random

import pytest
import torch
from torch.testing._internal.optests import opcheck

import bwdconv
from bwdconv._version import release
from conftest import aten_gradients

# (input size, weight size, stride, padding, dilation, groups): 1-3 spatial
# dims, strides below and above the filter size, padding, dilation, groups.
CASES = [
    ((2, 4, 9), (6, 4, 3), [2], [1], [1], 1),
    ((1, 3, 10), (3, 1, 1), [3], [0], [1], 3),
    ((2, 4, 9, 9), (8, 4, 3, 3), [2, 2], [1, 1], [1, 1], 1),
    ((2, 4, 8, 7), (4, 2, 1, 1), [2, 3], [0, 0], [1, 1], 2),
    ((1, 2, 7, 9), (4, 2, 2, 3), [3, 2], [1, 0], [2, 1], 1),
    ((1, 2, 5, 6, 7), (2, 2, 3, 1, 2), [2, 1, 3], [1, 0, 1], [1, 1, 2], 1),
    ((0, 2, 6, 6), (2, 2, 3, 3), [1, 1], [0, 0], [1, 1], 1),
]


def make_operands(case, dtype=torch.float64, requires_grad=False):
    input_size, weight_size, stride, padding, dilation, groups = case
    g = torch.Generator().manual_seed(sum(input_size) * 31 + sum(weight_size))
    x = torch.randn(input_size, generator=g, dtype=dtype).requires_grad_(requires_grad)
    w = torch.randn(weight_size, generator=g, dtype=dtype).requires_grad_(requires_grad)
    b = torch.randn(weight_size[0], generator=g, dtype=dtype).requires_grad_(requires_grad)
    return x, w, b


def forward(x, w, b, case):
    _, _, stride, padding, dilation, groups = case
    return torch.ops.bwdconv.convolution(x, w, b, stride, padding, dilation, groups)


@pytest.mark.parametrize("case", CASES)
def test_forward_matches_aten(case):
    x, w, b = make_operands(case)
    _, _, stride, padding, dilation, groups = case
    expected = torch.ops.aten.convolution(x, w, b, stride, padding, dilation, False,
                                          [0] * len(stride), groups)
    torch.testing.assert_close(forward(x, w, b, case), expected, rtol=0, atol=0)


@pytest.mark.parametrize("case", CASES)
def test_backward_ops_match_aten(case):
    x, w, _ = make_operands(case)
    _, _, stride, padding, dilation, groups = case
    y = forward(x, w, None, case)
    dy = torch.randn_like(y)
    grad_input, grad_weight = aten_gradients(dy, x, w, stride, padding, dilation, groups)
    ours_input = torch.ops.bwdconv.convolution_backward_input(
        dy, w, list(x.shape), stride, padding, dilation, groups)
    ours_weight = torch.ops.bwdconv.convolution_backward_weight(
        dy, x, list(w.shape), stride, padding, dilation, groups)
    torch.testing.assert_close(ours_input, grad_input, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(ours_weight, grad_weight, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("case", [c for c in CASES if c[0][0] > 0])
def test_gradcheck_and_gradgradcheck(case):
    x, w, b = make_operands(case, requires_grad=True)

    def f(x, w, b):
        return forward(x, w, b, case)

    assert torch.autograd.gradcheck(f, (x, w, b), fast_mode=True)
    assert torch.autograd.gradgradcheck(f, (x, w, b), fast_mode=True)


@pytest.mark.parametrize("case", [c for c in CASES if c[0][0] > 0])
def test_backward_ops_are_differentiable(case):
    x, w, _ = make_operands(case, requires_grad=True)
    _, _, stride, padding, dilation, groups = case
    dy = torch.randn_like(forward(x, w, None, case)).requires_grad_(True)

    def input_grad(dy, w):
        return torch.ops.bwdconv.convolution_backward_input(
            dy, w, list(x.shape), stride, padding, dilation, groups)

    def weight_grad(dy, x):
        return torch.ops.bwdconv.convolution_backward_weight(
            dy, x, list(w.shape), stride, padding, dilation, groups)

    assert torch.autograd.gradcheck(input_grad, (dy, w), fast_mode=True)
    assert torch.autograd.gradgradcheck(input_grad, (dy, w), fast_mode=True)
    assert torch.autograd.gradcheck(weight_grad, (dy, x), fast_mode=True)
    assert torch.autograd.gradgradcheck(weight_grad, (dy, x), fast_mode=True)


@pytest.mark.parametrize("case", [c for c in CASES if c[0][0] > 0])
def test_combined_backward_op(case):
    """convolution_backward returns both gradients (one aten call when both are
    planned for aten) and is differentiable like the single ops."""
    x, w, _ = make_operands(case, requires_grad=True)
    _, _, stride, padding, dilation, groups = case
    dy = torch.randn_like(forward(x, w, None, case)).requires_grad_(True)
    ex, ew = aten_gradients(dy.detach(), x.detach(), w.detach(), stride, padding, dilation, groups)
    gx, gw = torch.ops.bwdconv.convolution_backward(dy, x, w, stride, padding, dilation, groups)
    torch.testing.assert_close(gx, ex, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(gw, ew, rtol=1e-12, atol=1e-12)

    def both(dy, x, w):
        return torch.ops.bwdconv.convolution_backward(dy, x, w, stride, padding, dilation, groups)

    assert torch.autograd.gradcheck(both, (dy, x, w), fast_mode=True)
    assert torch.autograd.gradgradcheck(both, (dy, x, w), fast_mode=True)


def test_randomized_grid_matches_aten():
    """A few hundred random 1-3D shapes, float64, against aten."""
    seed = 20261122
    rng = random.Random(seed)
    for trial in range(300):
        dims = rng.randint(1, 3)
        groups = rng.choice([1, 1, 2, 3])
        k = [rng.randint(1, 4) for _ in range(dims)]
        s = [rng.randint(1, 4) for _ in range(dims)]
        d = [rng.randint(1, 3) for _ in range(dims)]
        p = [rng.randint(0, 3) for _ in range(dims)]
        size = [max(1, d[i] * (k[i] - 1) + 1 - 2 * p[i]) + rng.randint(0, 6) for i in range(dims)]
        case = ((rng.randint(1, 2), groups * rng.randint(1, 2), *size),
                (groups * rng.randint(1, 2), 0, *k), s, p, d, groups)
        case = (case[0], (case[1][0], case[0][1] // groups, *k), s, p, d, groups)
        x, w, _ = make_operands(case, requires_grad=True)
        y = forward(x, w, None, case)
        dy = torch.randn_like(y)
        gx, gw = torch.autograd.grad(y, (x, w), dy)
        ex, ew = aten_gradients(dy, x.detach(), w.detach(), s, p, d, groups)
        message = f"seed {seed} trial {trial}: case {case}"
        torch.testing.assert_close(gx, ex, rtol=1e-10, atol=1e-10, msg=message)
        torch.testing.assert_close(gw, ew, rtol=1e-10, atol=1e-10, msg=message)


@pytest.mark.parametrize("case", [CASES[0], CASES[2], CASES[5]])
@pytest.mark.parametrize("channels_last", [False, True])
def test_opcheck(case, channels_last):
    x, w, b = make_operands(case, dtype=torch.float32, requires_grad=True)
    if channels_last and x.dim() in (4, 5):
        fmt = torch.channels_last if x.dim() == 4 else torch.channels_last_3d
        x = x.detach().to(memory_format=fmt).requires_grad_(True)
    _, _, stride, padding, dilation, groups = case
    opcheck(torch.ops.bwdconv.convolution, (x, w, b, stride, padding, dilation, groups))
    dy = forward(x, w, b, case).detach()
    opcheck(torch.ops.bwdconv.convolution_backward_input,
            (dy, w, list(x.shape), stride, padding, dilation, groups))
    opcheck(torch.ops.bwdconv.convolution_backward_weight,
            (dy, x, list(w.shape), stride, padding, dilation, groups))
    opcheck(torch.ops.bwdconv.convolution_backward,
            (dy, x, w, stride, padding, dilation, groups))


# Before torch 2.11, aten.convolution_backward's meta function gave contiguous
# gradients whatever the operands' layout, unlike aten's own kernels (channels_last
# here); bwdconv follows the rule 2.11 fixed the meta function to.
OLD_CONVOLUTION_BACKWARD_META = release(torch.__version__) < (2, 11)


@pytest.mark.parametrize("channels_last", [False, pytest.param(True, marks=pytest.mark.xfail(
    OLD_CONVOLUTION_BACKWARD_META, strict=True,
    reason="this torch's meta function ignores the channels_last layout its kernels give"))])
def test_gradient_layout_matches_pytorch_meta(channels_last):
    x, w, _ = make_operands(CASES[2], dtype=torch.float32)
    if channels_last:
        x = x.to(memory_format=torch.channels_last)
    dy = forward(x, w, None, CASES[2])
    _, _, stride, padding, dilation, groups = CASES[2]
    meta = torch.ops.aten.convolution_backward(
        dy.to("meta"), x.to("meta"), w.to("meta"), None, stride, padding, dilation, False,
        [0, 0], groups, [True, True, False])
    gx = torch.ops.bwdconv.convolution_backward_input(
        dy, w, list(x.shape), stride, padding, dilation, groups)
    gw = torch.ops.bwdconv.convolution_backward_weight(
        dy, x, list(w.shape), stride, padding, dilation, groups)
    assert gx.stride() == meta[0].stride()
    assert gw.stride() == meta[1].stride()


def test_nn_grad_api_matches_torch_nn_grad():
    x, w, _ = make_operands(CASES[4])
    _, _, stride, padding, dilation, groups = CASES[4]
    dy = torch.randn_like(forward(x, w, None, CASES[4]))
    for ours, theirs in [(bwdconv.grad.conv2d_input, torch.nn.grad.conv2d_input)]:
        torch.testing.assert_close(ours(x.shape, w, dy, stride, padding, dilation, groups),
                                   theirs(x.shape, w, dy, stride, padding, dilation, groups))
    torch.testing.assert_close(
        bwdconv.grad.conv2d_weight(x, w.shape, dy, stride, padding, dilation, groups),
        torch.nn.grad.conv2d_weight(x, w.shape, dy, stride, padding, dilation, groups))


@pytest.mark.parametrize("dims", [1, 2, 3])
def test_nn_grad_api_every_rank(dims):
    x = torch.randn(2, 4, *[7] * dims, dtype=torch.float64)
    w = torch.randn(6, 2, *[3] * dims, dtype=torch.float64)
    dy = torch.randn(2, 6, *[4] * dims, dtype=torch.float64)  # (7 + 2 - 3) // 2 + 1
    ours_in = getattr(bwdconv.grad, f"conv{dims}d_input")
    ours_w = getattr(bwdconv.grad, f"conv{dims}d_weight")
    theirs_in = getattr(torch.nn.grad, f"conv{dims}d_input")
    theirs_w = getattr(torch.nn.grad, f"conv{dims}d_weight")
    torch.testing.assert_close(ours_in(x.shape, w, dy, 2, 1, 1, 2),
                               theirs_in(x.shape, w, dy, 2, 1, 1, 2))
    torch.testing.assert_close(ours_w(x, w.shape, dy, 2, 1, 1, 2),
                               theirs_w(x, w.shape, dy, 2, 1, 1, 2))


@pytest.mark.parametrize("grad_mode", [True, False])
def test_forward_mode_ad_is_refused_never_dropped(grad_mode):
    """A forward-mode tangent reaches autograd even under no_grad (where the
    ops otherwise skip autograd): refused with an error, never silently lost."""
    import torch.autograd.forward_ad as fwAD

    x = torch.randn(1, 2, 6, 6, dtype=torch.double)
    w = torch.randn(3, 2, 3, 3, dtype=torch.double)
    with fwAD.dual_level(), torch.set_grad_enabled(grad_mode):
        dual = fwAD.make_dual(x, torch.randn_like(x))
        with pytest.raises(RuntimeError, match="jvp is not implemented"):
            torch.ops.bwdconv.convolution(dual, w, None, [1, 1], [0, 0], [1, 1], 1)
        dy = fwAD.make_dual(torch.randn(1, 3, 4, 4, dtype=torch.double),
                            torch.randn(1, 3, 4, 4, dtype=torch.double))
        with pytest.raises(RuntimeError, match="jvp is not implemented"):
            torch.ops.bwdconv.convolution_backward_input(dy, w, [1, 2, 6, 6], [1, 1], [0, 0],
                                                         [1, 1], 1)


def test_no_graph_is_recorded_without_a_gradient_to_compute():
    x = torch.randn(1, 2, 6, 6, requires_grad=True)
    w = torch.randn(3, 2, 3, 3)
    with torch.no_grad():
        y = torch.ops.bwdconv.convolution(x, w, None, [1, 1], [0, 0], [1, 1], 1)
    assert y.grad_fn is None and not y.requires_grad
    y = torch.ops.bwdconv.convolution(x, w, None, [1, 1], [0, 0], [1, 1], 1)
    assert y.grad_fn is not None
    torch.testing.assert_close(
        torch.autograd.grad(y.sum(), x)[0],
        torch.autograd.grad(torch.nn.functional.conv2d(x, w).sum(), x)[0])
