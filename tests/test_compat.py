"""With bwdconv enabled PyTorch behaves exactly as without it: every call in a
grid of unusual ones gives the same result, or the same exception type and
message, in the functional scope and in the aten scope."""

import json
import subprocess
import sys

import torch
import torch.autograd.forward_ad as fwAD
import torch.nn.functional as F
import pytest
from torch import nn

import bwdconv
from conftest import aten_gradients


def randn(*sizes, dtype=torch.float64, requires_grad=False):
    return torch.randn(*sizes, dtype=dtype).requires_grad_(requires_grad)


def conv_and_grads(conv, x, w, bias=None, **kwargs):
    """The output and the gradients of every operand that requires one."""
    y = conv(x, w, bias, **kwargs)
    leaves = [t for t in (x, w, bias) if t is not None and t.requires_grad]
    if not leaves:
        return (y,)
    return (y, *torch.autograd.grad(y.abs().sum() if y.is_complex() else y.sum(), leaves))


def module_and_grads(module, x):
    y = module(x)
    return (y, *torch.autograd.grad(y.sum(), [x, *module.parameters()], allow_unused=True))


def batched_grads(conv, x, w, **kwargs):
    """Gradients for three grad_outputs at once: autograd.grad runs the
    backward under PyTorch's older vmap (its batched tensors reach the node)."""
    y = conv(x, w, **kwargs)
    return torch.autograd.grad(y, (x, w), torch.randn(3, *y.shape, dtype=y.dtype),
                               is_grads_batched=True)


def dual_conv(conv, x, w, tangent_of="input"):
    with fwAD.dual_level():
        tx = torch.ones_like(x) if tangent_of == "input" else None
        tw = torch.ones_like(w) if tangent_of == "weight" else None
        xd = fwAD.make_dual(x, tx) if tx is not None else x
        wd = fwAD.make_dual(w, tw) if tw is not None else w
        primal, tangent = fwAD.unpack_dual(conv(xd, wd))
        return primal.clone(), tangent.clone()


class Tagged(torch.Tensor):
    """A plain tensor subclass: PyTorch keeps the subclass through ops."""


# name -> a call; each runs with a fresh seed, so both sides get the same operands.
CASES = {
    "complex64 conv1d": lambda: F.conv1d(randn(1, 1, 10, dtype=torch.cfloat),
                                         randn(1, 1, 3, dtype=torch.cfloat)),
    "complex128 conv2d with gradients": lambda: conv_and_grads(
        F.conv2d, randn(1, 2, 6, 6, dtype=torch.cdouble, requires_grad=True),
        randn(3, 2, 3, 3, dtype=torch.cdouble, requires_grad=True), stride=2),
    "int64 conv2d on the CPU": lambda: F.conv2d(
        torch.randint(-5, 5, (1, 3, 6, 6)), torch.randint(-5, 5, (2, 3, 3, 3))),
    "int64 conv3d with an int64 bias": lambda: F.conv3d(
        torch.randint(-5, 5, (1, 2, 4, 4, 4)), torch.randint(-5, 5, (2, 2, 3, 3, 3)),
        torch.randint(-5, 5, (2,))),
    "dual input, conv2d": lambda: dual_conv(F.conv2d, randn(1, 1, 5, 5), randn(1, 1, 3, 3)),
    "dual weight, conv1d": lambda: dual_conv(
        lambda a, b: F.conv1d(a, b, stride=2), randn(2, 3, 9), randn(4, 3, 3), "weight"),
    "dual input, module with grad": lambda: dual_conv(
        lambda a, b: F.conv3d(a, b, padding=1), randn(1, 2, 4, 4, 4, requires_grad=True),
        randn(2, 2, 3, 3, 3, requires_grad=True)),
    "batch 0 with backward": lambda: module_and_grads(
        nn.Conv1d(4, 8, 2, stride=2).double(), randn(0, 4, 15, requires_grad=True)),
    "channels 0 with backward": lambda: module_and_grads(
        nn.Conv1d(0, 8, 2, stride=2).double(), randn(2, 0, 15, requires_grad=True)),
    "output channels 0 with backward": lambda: conv_and_grads(
        F.conv2d, randn(2, 3, 6, 6, requires_grad=True), randn(0, 3, 3, 3, requires_grad=True)),
    "None input": lambda: nn.Conv2d(3, 3, 3)(None),
    "None weight": lambda: F.conv2d(randn(1, 3, 5, 5, requires_grad=True), None),
    "wrong-rank input": lambda: F.conv2d(randn(3, 5, requires_grad=True),
                                         randn(2, 3, 3, 3, requires_grad=True)),
    "5-D input to conv2d": lambda: F.conv2d(randn(1, 1, 1, 5, 5, requires_grad=True),
                                            randn(2, 1, 3, 3)),
    "wrong-rank weight": lambda: F.conv1d(randn(1, 3, 8, requires_grad=True),
                                          randn(2, 3, 3, 3)),
    "input smaller than the filter": lambda: nn.Conv1d(3, 33, 10)(randn(1, 3, 4).float()),
    "padding same with stride 2": lambda: F.conv2d(
        randn(1, 2, 6, 6, requires_grad=True), randn(2, 2, 3, 3), stride=2, padding="same"),
    "padding valid with stride 2": lambda: conv_and_grads(
        F.conv2d, randn(1, 2, 7, 7, requires_grad=True), randn(2, 2, 3, 3), stride=2,
        padding="valid"),
    "padding same, even filter, dilation": lambda: conv_and_grads(
        F.conv1d, randn(2, 2, 9, requires_grad=True), randn(3, 2, 4, requires_grad=True),
        padding="same", dilation=2),
    "unknown padding string": lambda: F.conv2d(randn(1, 2, 6, 6, requires_grad=True),
                                               randn(2, 2, 3, 3), padding="full"),
    "negative padding": lambda: F.conv2d(randn(1, 2, 6, 6, requires_grad=True),
                                         randn(2, 2, 3, 3), padding=-1),
    "zero stride": lambda: F.conv2d(randn(1, 2, 6, 6, requires_grad=True), randn(2, 2, 3, 3),
                                    stride=0),
    "zero dilation": lambda: F.conv1d(randn(1, 2, 6, requires_grad=True), randn(2, 2, 3),
                                      dilation=0),
    "three strides for conv2d": lambda: F.conv2d(randn(1, 2, 6, 6, requires_grad=True),
                                                 randn(2, 2, 3, 3), stride=(1, 2, 1)),
    "float stride": lambda: F.conv2d(randn(1, 2, 6, 6, requires_grad=True), randn(2, 2, 3, 3),
                                     stride=1.5),
    "groups not dividing the channels": lambda: F.conv2d(
        randn(1, 3, 6, 6, requires_grad=True), randn(4, 1, 3, 3), groups=2),
    "groups 0": lambda: F.conv2d(randn(1, 2, 6, 6, requires_grad=True), randn(2, 2, 3, 3),
                                 groups=0),
    "weight of another dtype": lambda: F.conv2d(randn(1, 2, 6, 6, requires_grad=True),
                                                randn(2, 2, 3, 3, dtype=torch.float32)),
    "bias of another dtype": lambda: F.conv2d(randn(1, 2, 6, 6, requires_grad=True),
                                              randn(2, 2, 3, 3), randn(2, dtype=torch.float32)),
    "bias of the wrong size": lambda: F.conv2d(randn(1, 2, 6, 6, requires_grad=True),
                                               randn(2, 2, 3, 3), randn(3)),
    "weight channels not matching the input": lambda: F.conv2d(
        randn(1, 3, 6, 6, requires_grad=True), randn(2, 2, 3, 3)),
    "meta tensors": lambda: F.conv2d(randn(1, 2, 6, 6, requires_grad=True).to("meta"),
                                     randn(2, 2, 3, 3).to("meta"), stride=2),
    "tensor subclass": lambda: conv_and_grads(
        F.conv2d, randn(1, 2, 6, 6).as_subclass(Tagged).requires_grad_(),
        randn(2, 2, 3, 3, requires_grad=True), stride=2),
    "unbatched input with gradients": lambda: conv_and_grads(
        F.conv2d, randn(2, 7, 7, requires_grad=True), randn(3, 2, 3, 3, requires_grad=True),
        stride=2, padding=1),
    "no grad": lambda: torch.no_grad()(F.conv2d)(randn(1, 2, 6, 6, requires_grad=True),
                                                 randn(2, 2, 3, 3)),
    "batched gradients, float32 1x1 stride 2 (a strategy planned)": lambda: batched_grads(
        F.conv2d, randn(2, 64, 16, 16, dtype=torch.float32, requires_grad=True),
        randn(128, 64, 1, 1, dtype=torch.float32, requires_grad=True), stride=2),
    "batched gradients, transposed, stride 2": lambda: batched_grads(
        F.conv_transpose2d, randn(2, 4, 6, 6, requires_grad=True),
        randn(4, 3, 3, 3, requires_grad=True), stride=2),
    "float16 with gradients": lambda: conv_and_grads(
        F.conv2d, randn(2, 4, 8, 8, dtype=torch.float16, requires_grad=True),
        randn(4, 4, 3, 3, dtype=torch.float16, requires_grad=True), stride=2),
}


def outcome(call, seed=0):
    torch.manual_seed(seed)
    try:
        return "returned", call()
    except Exception as error:  # noqa: BLE001  (the exception is what is compared)
        return "raised", (type(error), str(error))


def flatten(value):
    return list(value) if isinstance(value, (tuple, list)) else [value]


def assert_same(ours, theirs):
    assert ours[0] == theirs[0], (ours, theirs)
    if ours[0] == "raised":
        assert ours[1] == theirs[1]
        return
    for a, b in zip(flatten(ours[1]), flatten(theirs[1]), strict=True):
        if b is None:
            assert a is None
            continue
        assert type(a) is type(b) and a.dtype == b.dtype and a.device == b.device
        assert a.shape == b.shape and a.stride() == b.stride()
        if b.device.type != "meta":
            torch.testing.assert_close(a, b, rtol=1e-6 if b.dtype == torch.float64 else 1e-3,
                                       atol=1e-6 if b.dtype == torch.float64 else 1e-2)


@pytest.mark.parametrize("scope", bwdconv.functional.SCOPES)
@pytest.mark.parametrize("name", CASES)
def test_unusual_calls_behave_as_without_bwdconv(scope, name):
    theirs = outcome(CASES[name])
    with bwdconv.enabled(scope):
        ours = outcome(CASES[name])
    assert_same(ours, theirs)


def test_the_grid_covers_raising_and_planned_calls():
    """The grid is worth running: some calls raise, and some are planned by
    bwdconv in the functional scope (not all fall back)."""
    raised = [n for n, call in CASES.items() if outcome(call)[0] == "raised"]
    assert len(raised) >= 15
    bwdconv.reset_served()
    with bwdconv.enabled():
        for name in ("padding valid with stride 2", "unbatched input with gradients",
                     "float16 with gradients"):
            outcome(CASES[name])
    assert sum(bwdconv.served()["input"].values()) == 3



def first_order_gradients(x, w, b, dy, stride, padding, groups, create_graph=False):
    """autograd.grad of conv2d with every operand requiring a gradient."""
    leaves = [t.detach().requires_grad_() for t in (x, w, b)]
    y = F.conv2d(*leaves, stride=stride, padding=padding, groups=groups)
    return torch.autograd.grad(y, leaves, dy(y), create_graph=create_graph)


FIRST_ORDER = {
    # The gradient of a sum is an expanded tensor: PyTorch's meta rule reads
    # the layout from it and the weight (contiguous), aten's kernel from the
    # channels_last input.
    "channels_last input, gradient of a sum": (
        torch.randn(2, 4, 9, 9).to(memory_format=torch.channels_last), torch.randn(6, 4, 3, 3),
        torch.randn(6), lambda y: torch.ones_like(y).sum().expand_as(y), 2, 1, 1),
    # One channel: only the strides of size-1 dims tell the layouts apart.
    "one-channel channels_last input": (
        torch.randn(2, 1, 8, 7).to(memory_format=torch.channels_last), torch.randn(3, 1, 3, 3),
        torch.randn(3), torch.randn_like, 1, 0, 1),
    # float32 bias: aten's backend sums it in its own order.
    "float32 bias, channels_last gradient": (
        torch.randn(3, 4, 11, 10), torch.randn(8, 2, 3, 3), torch.randn(8),
        lambda y: torch.randn_like(y).contiguous(memory_format=torch.channels_last), 2, 1, 2),
    "float16 depthwise": (
        torch.randn(2, 4, 9, 9).half(), torch.randn(4, 1, 3, 3).half(), torch.randn(4).half(),
        torch.randn_like, 2, 1, 4),
}


@pytest.mark.parametrize("name", FIRST_ORDER)
def test_first_order_backward_is_atens_bit_for_bit_in_the_functional_scope(name):
    """A backward that records no graph runs what PyTorch's autograd runs:
    the gradients aten computes (the bias's included) have aten's bits and
    strides, whatever layout the incoming gradient has."""
    x, w, b, dy, stride, padding, groups = FIRST_ORDER[name]
    torch.manual_seed(0)
    expected = first_order_gradients(x, w, b, dy, stride, padding, groups)
    bwdconv.reset_served()
    with bwdconv.enabled():
        torch.manual_seed(0)
        ours = first_order_gradients(x, w, b, dy, stride, padding, groups)
    assert sum(bwdconv.served()["input"].values()) == 1
    assert bwdconv.served()["input"]["aten"] == 1 and bwdconv.served()["weight"]["aten"] == 1
    for a, e in zip(ours, expected, strict=True):
        assert a.stride() == e.stride() and a.dtype == e.dtype
        assert torch.equal(a, e)


@pytest.mark.parametrize("name", FIRST_ORDER)
def test_create_graph_gradients_keep_aten_strides_in_the_functional_scope(name):
    """With create_graph (gradient penalties) the backward runs through
    bwdconv's differentiable ops; their results still come back in aten's
    layouts."""
    x, w, b, dy, stride, padding, groups = FIRST_ORDER[name]
    torch.manual_seed(0)
    expected = first_order_gradients(x, w, b, dy, stride, padding, groups, create_graph=True)
    with bwdconv.enabled():
        torch.manual_seed(0)
        ours = first_order_gradients(x, w, b, dy, stride, padding, groups, create_graph=True)
    tolerance = 1e-2 if x.dtype == torch.float16 else 1e-5
    for a, e in zip(ours, expected, strict=True):
        assert a.stride() == e.stride() and a.dtype == e.dtype
        assert a.requires_grad == e.requires_grad
        torch.testing.assert_close(a, e, rtol=tolerance, atol=tolerance)


def create_graph_gradients(transposed, leaves):
    """autograd.grad with create_graph of a stride-2 convolution (or
    transposed convolution) of a channels_last input, with only `leaves`
    requiring a gradient; then each gradient's square summed, backward."""
    torch.manual_seed(0)
    x = randn(2, 4, 7, 6).to(memory_format=torch.channels_last)
    w = randn(4, 6, 3, 3)
    b = randn(6)
    operands = {"input": x, "weight": w, "bias": b}
    for name in leaves:
        operands[name].requires_grad_()
    conv = F.conv_transpose2d if transposed else F.conv2d
    y = conv(x, w if transposed else w.transpose(0, 1).contiguous(), b, stride=2, padding=1)
    grads = torch.autograd.grad(y, [operands[n] for n in leaves], torch.randn_like(y),
                                create_graph=True)
    needing = [g for g in grads if g.requires_grad]
    if needing:
        sum(g.square().sum() for g in needing).backward()
    return grads, [operands[n].grad for n in leaves]


@pytest.mark.parametrize("transposed", [False, True], ids=["conv", "transposed"])
@pytest.mark.parametrize("leaves", [("input",), ("weight",), ("bias",), ("input", "bias"),
                                    ("weight", "bias"), ("input", "weight", "bias")])
def test_create_graph_gradients_require_grad_and_are_laid_out_as_atens(transposed, leaves):
    """aten's double-backward node takes grad_output, input and weight, so
    each gradient it returns requires grad when any of them does, even one
    that does not depend on it (the input gradient when only the input
    requires grad); code that differentiates it again must run the same with
    bwdconv, whichever strategy computed it, and get aten's layouts."""
    expected, expected_second = create_graph_gradients(transposed, leaves)
    for strategy in bwdconv.strategies():
        bwdconv.reset_served()
        with bwdconv.enabled(), bwdconv.force_strategy(strategy):
            ours, ours_second = create_graph_gradients(transposed, leaves)
        for a, e in zip(ours, expected, strict=True):
            assert (a.requires_grad, a.stride(), a.dtype) == (e.requires_grad, e.stride(), e.dtype)
            torch.testing.assert_close(a, e)
        for a, e in zip(ours_second, expected_second, strict=True):
            assert (a is None) == (e is None)
            if e is not None:
                torch.testing.assert_close(a, e)
    # A transposed convolution's forward is the matching input gradient.
    served = bwdconv.served()["forward" if transposed else "input"]
    assert "input" not in leaves or sum(served.values()) >= 1


def test_splitk_propagates_nan_from_output_rows_that_read_only_padding():
    """Both output rows read padding alone (stride 5 in H): aten still
    multiplies their grad_output by the zeros, so a NaN there is NaN in the
    weight gradient, and splitk's chunks must not skip those rows."""
    x = torch.randn(1, 3, 3, 3)
    w = torch.randn(2, 3, 1, 3)
    args = ([5, 2], [2, 1], [2, 1], 1)
    dy = torch.randn(1, 2, 2, 2)
    dy[0, 0, 0, 0] = float("nan")
    expected = aten_gradients(dy, x, w, *args)[1]
    assert expected.isnan().any()
    with bwdconv.force_strategy("splitk"):
        ours = torch.ops.bwdconv.convolution_backward_weight(dy, x, list(w.shape), *args)
    assert torch.equal(ours.isnan(), expected.isnan())
    torch.testing.assert_close(ours.nan_to_num(), expected.nan_to_num())


def test_asymmetric_same_padding_warns_as_aten_does():
    """aten warns once per process that 'same' padding with an even filter
    needs a padded copy; bwdconv pads such calls itself and must still give
    that warning (a fresh process: the warning is once per process)."""
    code = (
        "import json, warnings, torch, torch.nn.functional as F, bwdconv\n"
        "bwdconv.enable()\n"
        "x = torch.randn(1, 2, 8, 8, requires_grad=True)\n"
        "w = torch.randn(3, 2, 4, 4, requires_grad=True)\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    F.conv2d(x, w, padding='same').sum().backward()\n"
        "    F.conv2d(x, w, padding='same')\n"
        # planned for aten, both calls pass through: counted when they run
        "assert bwdconv.served()['input']['aten'] == 2\n"
        "print(json.dumps([(c.category.__name__, str(c.message)) for c in caught]))\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    caught = json.loads(run.stdout)
    assert len(caught) == 1 and caught[0][0] == "UserWarning"
    assert caught[0][1].startswith("Using padding='same' with even kernel lengths and odd "
                                   "dilation may require a zero-padded copy of the input")
