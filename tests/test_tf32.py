"""TF32 as PyTorch does it: a strategy's float32 sub-convolutions follow
torch.backends.cudnn.allow_tf32 as aten's own convolutions do, and its GEMMs
follow torch.backends.cuda.matmul.allow_tf32 (float32_matmul_precision).

On the CPU the flags change nothing, so what is checked there is the route
that reads them: every convolution a strategy runs is an aten::convolution
(which reads the user's flags, as aten's backward does), never an
aten::_convolution called with TF32 decided by bwdconv."""

import pytest
import torch
from torch.profiler import profile

import bwdconv

# (input, weight, stride, padding) each strategy serves with a convolution of its own
CASES = {
    "phase": ((2, 4, 9, 9), (6, 4, 3, 3), [2, 2], [1, 1]),
    "phase_stacked": ((2, 4, 9, 9), (6, 4, 3, 3), [2, 2], [1, 1]),
    "scatter": ((2, 4, 9, 9), (6, 4, 3, 3), [2, 2], [1, 1]),
    "swap1x1": ((2, 4, 9, 9), (6, 4, 2, 2), [2, 2], [0, 0]),
}


def input_gradient(strategy, device="cpu", dtype=torch.float32, seed=0):
    x_size, w_size, s, p = CASES[strategy]
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(w_size, generator=g, dtype=torch.float64)
    x = torch.empty(x_size, dtype=torch.float64)
    out = torch.nn.functional.conv2d(x, w, stride=s, padding=p)
    dy = torch.randn(out.shape, generator=g, dtype=torch.float64)
    w, dy = w.to(device, dtype), dy.to(device, dtype)
    with bwdconv.force_strategy(strategy, strict=True):
        dx = torch.ops.bwdconv.convolution_backward_input(dy, w, list(x_size), s, p, [1, 1], 1)
    return dx, (dy, w, x_size, s, p)


@pytest.mark.parametrize("strategy", [s for s in CASES if s != "swap1x1"])
def test_every_sub_convolution_is_an_aten_convolution(strategy):
    with profile() as prof:
        input_gradient(strategy)
    names = [e.name for e in prof.events()]
    inner = names.count("aten::_convolution")
    assert inner >= 1
    assert names.count("aten::convolution") == inner, names


def float64_bounds(strategy, dx_device, operands, rounding):
    """(reference, bound) of the input gradient by the accuracy rule."""
    from bwdconv import _accuracy

    dy, w, x_size, s, p = operands

    def aten(dy, w):
        x = torch.empty(x_size, dtype=dy.dtype, device=dy.device)
        return torch.ops.aten.convolution_backward(dy, x, w, None, s, p, [1, 1], False, [0, 0],
                                                   1, [True, False, False])[0]
    reference = aten(dy.double(), w.double())
    magnitude = aten(dy.double().abs(), w.double().abs())
    terms = _accuracy.gradient_terms(dy.shape, w.shape, 1)[0]
    ((_, bound),) = _accuracy.bounds(dy.dtype, [aten(dy, w)], [reference], [magnitude], [terms],
                                     rounding)
    return reference, bound


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("strategy", list(CASES))
def test_float32_strategies_follow_the_tf32_flags_on_gpu(strategy):
    """TF32 off (cuDNN and matmul): full precision, the rule without TF32's
    rounding. TF32 on: within the TF32 bound. (That the flag reaches the
    sub-convolutions is the CPU test above: the backends may pick a
    full-precision kernel for a small call either way.)"""
    from bwdconv import _accuracy

    flags = (torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32)
    try:
        torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
        off, operands = input_gradient(strategy, device="cuda")
        reference, bound = float64_bounds(strategy, off.device, operands, 0.0)
        assert (off.double() - reference).abs().max().item() <= bound
        torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = True
        on, operands = input_gradient(strategy, device="cuda")
        rounding = _accuracy.operand_roundoff(torch.float32, "cuda")
        assert rounding > 0
        reference, bound = float64_bounds(strategy, on.device, operands, rounding)
        assert (on.double() - reference).abs().max().item() <= bound
    finally:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = flags
