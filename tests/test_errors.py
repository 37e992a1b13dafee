"""Bad input raises an exception whose message names the problem."""

import pytest
import torch

import bwdconv

x4 = torch.randn(2, 4, 9, 9)
w4 = torch.randn(8, 4, 3, 3)


def conv(input=x4, weight=w4, bias=None, stride=(1, 1), padding=(0, 0), dilation=(1, 1),
         groups=1):
    return torch.ops.bwdconv.convolution(input, weight, bias, list(stride), list(padding),
                                         list(dilation), groups)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: conv(input=torch.randn(2, 4)), "expected input to be a 3-D, 4-D or 5-D tensor"),
        (lambda: conv(weight=torch.randn(8, 4, 3)), "expected weight to be 4-D"),
        (lambda: conv(weight=w4.double()), r"input type \(float\) and weight type \(double\)"),
        (lambda: conv(input=x4.to(torch.int64), weight=w4.to(torch.int64)),
         "expected a float64, float32, float16 or bfloat16 input"),
        (lambda: conv(weight=torch.randn(8, 2, 3, 3), groups=3), "groups=3 does not divide"),
        (lambda: conv(weight=torch.randn(9, 1, 3, 3), groups=4),
         "does not divide the 9 output channels"),
        (lambda: conv(weight=torch.randn(8, 3, 3, 3)), "expects an input with 3 channels"),
        (lambda: conv(stride=(0, 1)), "non-positive stride"),
        (lambda: conv(padding=(-1, 0)), "negative padding"),
        (lambda: conv(dilation=(1, 0)), "dilation should be greater than zero"),
        (lambda: conv(groups=0), "non-positive groups"),
        (lambda: conv(input=torch.randn(2, 4, 2, 9)),
         "kernel size can't be greater than the padded input size"),
        (lambda: conv(stride=(1, 1, 1)), "expected stride to have 2 values"),
        (lambda: conv(bias=torch.randn(7)), r"expected bias of size \[8\]"),
        (lambda: conv(bias=torch.randn(8).double()), r"bias type \(double\)"),
    ],
)
def test_forward_errors(call, message):
    with pytest.raises(RuntimeError, match=message):
        call()


def test_backward_input_errors():
    dy = torch.randn(2, 8, 4, 4)
    op = torch.ops.bwdconv.convolution_backward_input
    with pytest.raises(RuntimeError, match=r"grad_output has spatial size \[4, 4\]"):
        op(dy, w4, [2, 4, 9, 9], [1, 1], [0, 0], [1, 1], 1)
    with pytest.raises(RuntimeError, match="expected input_size to be 4-D"):
        op(dy, w4, [2, 4, 9], [2, 2], [0, 0], [1, 1], 1)
    with pytest.raises(RuntimeError, match=r"expected grad_output of size \[3, 8, ...\]"):
        op(dy, w4, [3, 4, 9, 9], [2, 2], [0, 0], [1, 1], 1)
    with pytest.raises(RuntimeError, match=r"grad_output type \(double\) and weight type"):
        op(dy.double(), w4, [2, 4, 9, 9], [2, 2], [0, 0], [1, 1], 1)


def test_backward_weight_errors():
    dy = torch.randn(2, 8, 4, 4)
    op = torch.ops.bwdconv.convolution_backward_weight
    with pytest.raises(RuntimeError, match="non-positive stride"):
        op(dy, x4, [8, 4, 3, 3], [0, 2], [0, 0], [1, 1], 1)
    with pytest.raises(RuntimeError, match=r"grad_output type \(float\) and input type"):
        op(dy, x4.double(), [8, 4, 3, 3], [2, 2], [0, 0], [1, 1], 1)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_device_mismatch():
    with pytest.raises(RuntimeError, match="on the same device"):
        conv(weight=w4.cuda())


def test_device_mismatch_on_meta_and_cpu():
    # The meta device stands in for a second device on a CPU-only machine.
    with pytest.raises(RuntimeError, match="expected input and weight on the same device"):
        conv(weight=w4.to("meta"))
    with pytest.raises(RuntimeError, match="expected grad_output and weight on the same device"):
        torch.ops.bwdconv.convolution_backward_input(
            torch.randn(2, 8, 7, 7, device="meta"), w4, [2, 4, 9, 9], [1, 1], [0, 0], [1, 1], 1)


@pytest.mark.parametrize("args, kwargs", [
    ((torch.randn(4, 9, requires_grad=True), w4), {}),
    ((x4, w4.clone().requires_grad_()), {"stride": (1, 2, 3)}),
    ((x4, w4.clone().requires_grad_()), {"padding": "same", "stride": 2}),
    ((x4, w4.clone().requires_grad_()), {"padding": "full"}),
])
def test_functional_errors_are_pytorchs(args, kwargs):
    """bwdconv.conv2d raises exactly what torch.nn.functional.conv2d raises."""
    with pytest.raises(Exception) as theirs:
        torch.nn.functional.conv2d(*args, **kwargs)
    with pytest.raises(type(theirs.value)) as ours:
        bwdconv.conv2d(*args, **kwargs)
    assert str(ours.value) == str(theirs.value)


def test_forcing_an_unknown_strategy_names_the_known_ones():
    with pytest.raises(ValueError, match=r"force_strategy\(\): name='fastest': expected one of aten, swap1x1"):
        with bwdconv.force_strategy("fastest"):
            pass


def test_explain_rejects_bad_geometry():
    with pytest.raises(ValueError, match="groups=3 does not divide"):
        bwdconv.explain([2, 4, 9, 9], [8, 2, 3, 3], groups=3)
