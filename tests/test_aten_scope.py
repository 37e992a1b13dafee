"""The process-wide "aten" scope: what it plans, what it leaves to aten."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import bwdconv
from conftest import module_gradients


def run_in_aten_scope(module, x, strategy=None):
    """(gradients with the aten scope, gradients without it, served counts)."""
    expected = module_gradients(module, x)
    bwdconv.reset_served()
    with bwdconv.enabled("aten"), bwdconv.force_strategy(strategy):
        ours = module_gradients(module, x)
    return ours, expected, bwdconv.served()


def assert_all_close(ours, expected, tolerance):
    for a, b in zip(ours, expected, strict=True):
        torch.testing.assert_close(a, b, rtol=tolerance, atol=tolerance)


def test_transposed_convolutions_are_planned_forward_and_weight_gradient():
    """The forward (the matching input gradient) and the weight gradient of a
    transposed convolution are planned; as the CPU rules plan aten for both,
    the results are aten's bit for bit."""
    m = nn.ConvTranspose2d(4, 2, 3, stride=2).double()
    ours, expected, served = run_in_aten_scope(m, torch.randn(1, 4, 5, 5, dtype=torch.double))
    assert served["forward"] == {**{s: 0 for s in served["forward"]}, "aten": 1}
    assert served["weight"] == {**{s: 0 for s in served["weight"]}, "aten": 1}
    assert sum(served["input"].values()) == 0  # the input gradient is a forward convolution
    assert_all_close(ours, expected, 0)


def test_planned_convolutions_are_counted_and_match():
    m = nn.Conv1d(2, 4, 3, stride=2).double()
    ours, expected, served = run_in_aten_scope(m, torch.randn(3, 2, 11, dtype=torch.double))
    assert sum(served["weight"].values()) == 1
    assert_all_close(ours, expected, 1e-12)


def test_forced_strategy_applies_through_the_aten_scope():
    m = nn.Conv2d(3, 4, 3, stride=2, padding=1).double()
    ours, expected, served = run_in_aten_scope(
        m, torch.randn(2, 3, 9, 9, dtype=torch.double), strategy="phase_stacked")
    assert served["input"]["phase_stacked"] == 1
    assert_all_close(ours, expected, 1e-12)


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


def raised_by(call):
    """(type, message) of what `call` raises, or None."""
    try:
        call()
    except Exception as error:  # noqa: BLE001 - any error is compared with aten's
        return type(error), str(error)
    return None


@pytest.mark.parametrize("grad_shape", [(1, 2, 3), (1, 2, 3, 3, 1)])
def test_a_bad_grad_output_of_a_channels_last_call_raises_atens_error(grad_shape):
    # bwdconv reads grad_output in the forward output's layout (channels_last
    # here) before aten checks it: a gradient of the wrong rank must still
    # get aten's own error.
    x = torch.randn(1, 4, 5, 5).contiguous(memory_format=torch.channels_last)
    w = torch.randn(2, 4, 3, 3)
    dy = torch.randn(grad_shape)

    def call():
        torch.ops.aten.convolution_backward(dy, x, w, None, [1, 1], [0, 0], [1, 1], False,
                                            [0, 0], 1, [True, True, False])
    expected = raised_by(call)
    with bwdconv.enabled("aten"):
        assert raised_by(call) == expected


def convolution_backward_strides(grad_output, x, w, stride, strategy=None, scope=None):
    """Strides of aten::convolution_backward's input and weight gradients."""
    args = (grad_output, x, w, None, stride, [0] * len(stride), [1] * len(stride), False,
            [0] * len(stride), 1, [True, True, False])
    if scope is None:
        grads = torch.ops.aten.convolution_backward(*args)
    else:
        with bwdconv.enabled(scope), bwdconv.force_strategy(strategy):
            grads = torch.ops.aten.convolution_backward(*args)
    return grads[0].stride(), grads[1].stride()


def test_gradients_keep_aten_strides_where_size_one_dims_make_them_ambiguous():
    # One input channel, a 1x1 filter: the strides of size-1 dims tell the
    # layout aten chose (channels_last here, from the input), which a
    # layout-agnostic restride would lose.
    x = torch.randn(2, 1, 9, 20).to(memory_format=torch.channels_last)
    for w, stride in ((torch.randn(3, 1, 1, 1), [2, 2]), (torch.randn(3, 1, 3, 5), [4, 4])):
        dy = torch.randn(2, 3, *(
            (size - k) // s + 1 for size, k, s in zip(x.shape[2:], w.shape[2:], stride)))
        expected = convolution_backward_strides(dy, x, w, stride)
        # A strategy that cannot serve gives way to the planner (not strict).
        for strategy in (None, *bwdconv.strategies()):
            ours = convolution_backward_strides(dy, x, w, stride, strategy, scope="aten")
            assert ours == expected, (strategy, w.shape)


@pytest.mark.parametrize("scope", bwdconv.functional.SCOPES)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float16])
def test_grouped_one_channel_weight_gradient_keeps_aten_strides(scope, dtype):
    # Groups of one input channel, a channels_last input: aten's CPU path
    # without grouped kernels (float64, float16 here) concatenates per-group
    # weight gradients into contiguous strides, where the backend's layout
    # rule says channels_last; the two differ only in the size-1 dim.
    x = torch.randn(2, 4, 7, 6, dtype=dtype).to(memory_format=torch.channels_last)
    w = torch.randn(8, 1, 3, 2, dtype=dtype, requires_grad=True)
    dy = torch.randn(2, 8, 5, 5, dtype=dtype)

    def weight_gradient():
        y = F.conv2d(x, w, groups=4) if scope == "functional" else torch.ops.aten.convolution(
            x, w, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 4)
        return torch.autograd.grad(y, w, dy)[0]

    expected = weight_gradient()
    bwdconv.reset_served()
    with bwdconv.enabled(scope), bwdconv.force_strategy("splitk"):
        ours = weight_gradient()
    assert bwdconv.served()["weight"]["splitk"] == 1
    assert ours.stride() == expected.stride()
    torch.testing.assert_close(ours, expected, rtol=1e-2, atol=1e-2)
