"""The process-wide "aten" scope: what it plans, what it leaves to aten."""

import torch
from torch import nn

import bwdconv


def grads(module, x):
    module.zero_grad(set_to_none=True)
    x = x.detach().requires_grad_(True)
    module(x).square().sum().backward()
    return [x.grad] + [p.grad for p in module.parameters()]


def test_transposed_convolutions_stay_with_aten():
    m = nn.ConvTranspose2d(4, 2, 3, stride=2).double()
    x = torch.randn(1, 4, 5, 5, dtype=torch.double)
    expected = grads(m, x)
    bwdconv.reset_served()
    with bwdconv.enabled("aten"):
        ours = grads(m, x)
    assert sum(bwdconv.served()["input"].values()) == 0
    for a, b in zip(ours, expected, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_planned_convolutions_are_counted_and_match():
    m = nn.Conv1d(2, 4, 3, stride=2).double()
    x = torch.randn(3, 2, 11, dtype=torch.double)
    expected = grads(m, x)
    bwdconv.reset_served()
    with bwdconv.enabled("aten"):
        ours = grads(m, x)
    assert sum(bwdconv.served()["weight"].values()) == 1
    for a, b in zip(ours, expected, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_forced_strategy_applies_through_the_aten_scope():
    m = nn.Conv2d(3, 4, 3, stride=2, padding=1).double()
    x = torch.randn(2, 3, 9, 9, dtype=torch.double)
    expected = grads(m, x)
    bwdconv.reset_served()
    with bwdconv.enabled("aten"), bwdconv.force_strategy("phase_stacked"):
        ours = grads(m, x)
    assert bwdconv.served()["input"]["phase_stacked"] == 1
    for a, b in zip(ours, expected, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_aten_errors_are_kept_for_bad_arguments():
    dy = torch.randn(1, 2, 3, 3)
    x = torch.randn(1, 4, 5, 5)
    w = torch.randn(2, 4, 3, 3)
    with bwdconv.enabled("aten"):
        try:
            torch.ops.aten.convolution_backward(dy, x, w, None, [1, 1], [0, 0], [1, 1], False,
                                                [0, 0], 3, [True, True, False])
        except RuntimeError as error:
            message = str(error)
        else:
            message = ""
    assert message, "a groups value that does not divide the channels was accepted"
    assert "bwdconv" not in message  # aten's own message, not bwdconv's
