"""torch.compile with bwdconv enabled, and the process-wide aten scope."""

import pytest
import torch
from torch import nn
from torch._dynamo.utils import counters

import bwdconv


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.conv2 = nn.Conv2d(8, 8, 1, stride=2, bias=False)
        self.conv3 = nn.Conv2d(8, 4, 3, padding=1, groups=4, padding_mode="reflect")

    def forward(self, x):
        return self.conv3(torch.relu(self.conv2(torch.relu(self.conv1(x)))))


def gradients(model, x):
    model.zero_grad()
    x = x.detach().requires_grad_(True)
    model(x).square().mean().backward()
    return [x.grad] + [p.grad.clone() for p in model.parameters()]


def reference_case():
    """A Net, an input and the gradients aten gives for them."""
    torch.manual_seed(0)
    model = Net()
    x = torch.randn(2, 3, 16, 16)
    return model, x, gradients(model, x)


def assert_all_close(ours, expected):
    for a, b in zip(ours, expected, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dynamic", [False, True])
def test_compiled_fullgraph_functional_scope(dynamic):
    model, x, expected = reference_case()
    torch._dynamo.reset()
    bwdconv.enable()
    compiled = torch.compile(model, fullgraph=True, dynamic=dynamic, backend="aot_eager")
    assert_all_close(gradients(compiled, x), expected)
    if dynamic:  # a second batch size and image size reuse the dynamic graph
        x2 = torch.randn(3, 3, 20, 18)
        bwdconv.disable()
        expected2 = gradients(model, x2)
        bwdconv.enable()
        assert_all_close(gradients(compiled, x2), expected2)


def test_dynamic_weight_sizes_in_the_functional_scope():
    """Weights passed as inputs get symbolic sizes in a dynamic graph; the
    traced backward must not read them as integers (that specialises the
    graph: one compilation per output channel count)."""
    def loss(x, w, b):
        return torch.nn.functional.conv2d(x, w, b, stride=2, padding=1).square().sum()

    torch._dynamo.reset()
    counters.clear()
    compiled = torch.compile(loss, backend="aot_eager", dynamic=True, fullgraph=True)
    for batch, out_channels in ((2, 4), (3, 6)):
        torch.manual_seed(batch)
        operands = [torch.randn(batch, 3, 9 + batch, 9), torch.randn(out_channels, 3, 3, 3),
                    torch.randn(out_channels)]
        operands = [t.requires_grad_() for t in operands]
        expected = torch.autograd.grad(loss(*operands), operands)
        bwdconv.reset_served()
        with bwdconv.enabled():
            ours = torch.autograd.grad(compiled(*operands), operands)
        assert bwdconv.served()["weight"]["aten"] == 1
        assert_all_close(ours, expected)
    assert counters["stats"]["unique_graphs"] == 1


def test_compiled_graph_contains_bwdconv_ops():
    bwdconv.enable()
    seen = []

    def backend(gm, example_inputs):
        seen.extend(str(n.target) for n in gm.graph.nodes if n.op == "call_function")
        return gm

    torch._dynamo.reset()
    compiled = torch.compile(Net(), fullgraph=True, backend=backend)
    compiled(torch.randn(1, 3, 8, 8))
    assert any(target.startswith("bwdconv.convolution") for target in seen), seen


def test_compiled_with_inductor_functional_scope():
    model, x, expected = reference_case()
    torch._dynamo.reset()
    with bwdconv.enabled():
        compiled = torch.compile(model, fullgraph=True)
        assert_all_close(gradients(compiled, x), expected)


def test_aten_scope_eager_matches_and_is_planned():
    torch.manual_seed(0)
    model = Net().double()
    x = torch.randn(2, 3, 12, 12, dtype=torch.double)
    expected = gradients(model, x)
    assert not bwdconv.is_enabled("aten")
    bwdconv.enable("aten")
    assert bwdconv.is_enabled("aten") and not bwdconv.is_enabled("functional")
    bwdconv.reset_served()
    ours = gradients(model, x)
    served = bwdconv.served()
    # x requires grad, so every conv computes both gradients, each by the
    # strategy explain() names for it.
    expected_input = {}
    for conv, shape in ((model.conv1, (2, 3, 12, 12)), (model.conv2, (2, 8, 6, 6))):
        name = bwdconv.explain(shape, conv.weight, conv.stride, conv.padding, conv.dilation,
                               conv.groups).input_strategy
        expected_input[name] = expected_input.get(name, 0) + 1
    conv3_input = bwdconv.explain((2, 8, 5, 5), model.conv3.weight, 1, 0, 1, 4).input_strategy
    expected_input[conv3_input] = expected_input.get(conv3_input, 0) + 1
    assert {k: v for k, v in served["input"].items() if v} == expected_input
    assert sum(served["weight"].values()) == 3
    bwdconv.disable("aten")
    assert not bwdconv.is_enabled("aten")
    bwdconv.reset_served()
    gradients(model, x)
    assert sum(bwdconv.served()["input"].values()) == 0
    for a, b in zip(ours, expected, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_aten_scope_compiled_with_inductor():
    model, x, expected = reference_case()
    torch._dynamo.reset()
    with bwdconv.enabled("aten"):
        bwdconv.reset_served()
        compiled = torch.compile(model)
        assert_all_close(gradients(compiled, x), expected)
        assert sum(bwdconv.served()["weight"].values()) == 3  # inductor's extern calls were planned
        channels_last = model.to(memory_format=torch.channels_last)
        xc = x.to(memory_format=torch.channels_last)
        torch._dynamo.reset()
        compiled_cl = torch.compile(channels_last)
        assert_all_close(gradients(compiled_cl, xc), expected)


@pytest.mark.parametrize("transposed", [False, True])
def test_compiled_autograd_traces_bwdconvs_nodes(transposed):
    """torch.compile's compiled autograd traces the backward graph through
    bwdconv's autograd nodes (their saved arguments included), with a
    strategy computing the planned gradient, to aten's gradients."""
    from torch._dynamo import compiled_autograd

    torch.manual_seed(0)
    if transposed:
        x, w = torch.randn(2, 4, 5, 5), torch.randn(4, 3, 2, 2)
        args = ([2, 2], [0, 0], [1, 1], True, [1, 1], 1)
        ours = lambda x, w, b: nn.functional.conv_transpose2d(x, w, b, 2, 0, 1)  # noqa: E731
    else:
        x, w = torch.randn(2, 3, 8, 8), torch.randn(4, 3, 1, 1)
        args = ([2, 2], [0, 0], [1, 1], False, [0, 0], 1)
        ours = lambda x, w, b: nn.functional.conv2d(x, w, b, 2)  # noqa: E731
    b = torch.randn(w.shape[1] if transposed else w.shape[0])
    operands = [t.requires_grad_() for t in (x, w, b)]
    expected = torch.autograd.grad(
        torch.ops.aten.convolution(*operands, *args).square().sum(), operands)
    bwdconv.enable()
    bwdconv.reset_served()
    with bwdconv.force_strategy("swap1x1"), \
            compiled_autograd._enable(torch.compile(backend="aot_eager")):
        got = torch.autograd.grad(ours(*operands).square().sum(), operands)
    assert_all_close(got, expected)
    # A transposed convolution's forward is the matching input gradient.
    assert bwdconv.served()["forward" if transposed else "input"]["swap1x1"] == 1


# Transposed convolutions valid for aten that bwdconv does not plan:
# (input size, weight size, stride, padding, output padding, dilation).
UNPLANNED_TRANSPOSED = {
    # aten takes an output padding below the stride or the dilation; bwdconv
    # plans only those below the stride.
    "output padding below the dilation only": ((1, 3, 7, 2), (3, 4, 2, 3), [1, 2], [2, 2],
                                               [1, 0], [2, 1]),
    "an empty output": ((2, 1, 9, 4), (1, 2, 3, 1), [2, 1], [1, 2], [0, 0], [1, 1]),
}


@pytest.mark.parametrize("grad", [False, True])
@pytest.mark.parametrize("name", UNPLANNED_TRANSPOSED)
def test_compiled_transposed_calls_bwdconv_does_not_plan_are_atens(name, grad):
    """Traced, such a call must not reach bwdconv's op (whose error a graph
    could not catch): it compiles and runs as aten's, whatever is forced."""
    x_size, w_size, stride, padding, output_padding, dilation = UNPLANNED_TRANSPOSED[name]
    torch.manual_seed(0)
    x = torch.randn(x_size, requires_grad=grad)  # (float64's slow path refuses the empty one)
    w = torch.randn(w_size)

    def step(x):
        y = torch.nn.functional.conv_transpose2d(x, w, None, stride, padding, output_padding,
                                                 1, dilation)
        return (y, *torch.autograd.grad(y.sum(), x)) if grad else (y,)

    expected = step(x)
    for strategy in bwdconv.strategies("input"):
        torch._dynamo.reset()
        with bwdconv.enabled(), bwdconv.force_strategy(strategy):
            got = torch.compile(step, fullgraph=not grad)(x)
        assert_all_close(got, expected)


@pytest.mark.parametrize("strides", [(24, 1, 8, 1), (24, 24, 8, 1)])
def test_gradient_layout_ignores_the_stride_a_size_1_dim_leaves_free(strides):
    """A grad_output dense in the default layout whose one channel leaves its
    stride free: the weight gradient is contiguous, from the fake kernel and
    the real one alike, whichever stride the channel dim has (torch.compile
    traced one and ran the other)."""
    grad_output = torch.randn(3 * 3 * 8).as_strided((3, 1, 3, 8), strides)
    x = torch.randn(3, 2, 5, 8)
    args = ([1, 2, 1, 3], [2, 1], [0, 1], [1, 1], 1)
    real = torch.ops.bwdconv.convolution_backward_weight(grad_output, x, *args)
    with torch._subclasses.fake_tensor.FakeTensorMode() as mode:
        fake = torch.ops.bwdconv.convolution_backward_weight(
            mode.from_tensor(grad_output), mode.from_tensor(x), *args)
    assert real.stride() == fake.stride() == (6, 3, 3, 1)


def test_compiled_weight_gradient_of_a_one_channel_output_with_a_channels_last_weight():
    """Inductor's compiled conv2d with one output channel and a channels_last
    weight, only the weight requiring a gradient, relayout forced, and a
    contiguous gradient for its output (which it traced with the output's
    channels_last strides): the weight gradient aten gives, without a stride
    assertion failing (the fake kernel once predicted channels_last from the
    traced strides, the real one gave contiguous from the gradient's)."""
    torch.manual_seed(0)
    x = torch.randn(3, 2, 5, 8)
    weight = torch.randn(1, 2, 1, 3).contiguous(memory_format=torch.channels_last)
    bias = torch.randn(1)
    grad_output = torch.randn(3, 1, 3, 8)

    def forward(w):
        return torch.nn.functional.conv2d(x, w, bias, stride=[2, 1], padding=[0, 1])

    w = weight.clone().requires_grad_(True)
    expected, = torch.autograd.grad(forward(w), w, grad_output)
    torch._dynamo.reset()
    with torch._inductor.config.patch(force_disable_caches=True), bwdconv.enabled("functional"), \
            bwdconv.force_strategy("relayout"):
        ours, = torch.autograd.grad(torch.compile(forward, fullgraph=True)(w), w, grad_output)
    torch._dynamo.reset()
    torch.testing.assert_close(ours, expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("strides", [(30, 1, 10, 1), (30, 30, 10, 1)])
def test_the_convolution_op_lays_out_its_output_whatever_stride_a_size_1_dim_has(strides):
    """bwdconv.convolution of an operand dense in the default layout whose
    one channel leaves its stride free: the fake kernel and the real one
    lay the output out contiguous whichever stride the channel dim has
    (csrc/ops/geometry.h, settled)."""
    grad = torch.randn(90, dtype=torch.float64).as_strided((3, 1, 3, 10), strides)
    weight = torch.randn(4, 1, 3, 4, dtype=torch.float64)
    args = (None, [2, 1], [1, 0], [1, 1], 1)
    real = torch.ops.bwdconv.convolution(grad, weight, *args)
    with torch._subclasses.fake_tensor.FakeTensorMode() as mode:
        fake = torch.ops.bwdconv.convolution(mode.from_tensor(grad), mode.from_tensor(weight),
                                             *args)
    assert real.stride() == fake.stride() == (56, 14, 7, 1)


def test_compiled_input_gradient_of_a_transposed_convolution_with_one_output_channel():
    """Inductor's compiled conv_transpose2d with one output channel and a
    channels_last input, a contiguous gradient for its output (which it
    traced with the output's strides, (30, 1, 10, 1)): the input gradient,
    bwdconv.convolution of that gradient, is aten's, without a stride
    assertion failing (random seed 606: the op's fake laid its output out
    channels_last from the traced strides, its kernel contiguous from the
    real ones)."""
    torch.manual_seed(0)
    x = torch.randn(3, 4, 2, 7, dtype=torch.float64).contiguous(memory_format=torch.channels_last)
    weight = torch.randn(4, 1, 3, 4, dtype=torch.float64)
    grad_output = torch.randn(3, 1, 3, 10, dtype=torch.float64)

    def forward(x):
        return torch.nn.functional.conv_transpose2d(x, weight, None, [2, 1], [1, 0])

    x.requires_grad_(True)
    expected, = torch.autograd.grad(forward(x), x, grad_output)
    torch._dynamo.reset()
    with torch._inductor.config.patch(force_disable_caches=True), bwdconv.enabled("functional"):
        ours, = torch.autograd.grad(torch.compile(forward, fullgraph=True)(x), x, grad_output)
    torch._dynamo.reset()
    torch.testing.assert_close(ours, expected)
