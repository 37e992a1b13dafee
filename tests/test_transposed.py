"""Transposed convolutions: bwdconv.conv_transpose and the scopes that plan
F.conv_transpose*d / nn.ConvTranspose*d, against aten and float64 math."""

import random

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.testing._internal.optests import opcheck

import bwdconv

GRID_SEED = 20261126
INPUT_STRATEGIES = bwdconv.strategies("input")
STRATEGIES = [s for s in bwdconv.strategies() if s != "aten"]  # each forced
FORWARD_STRATEGIES = [s for s in INPUT_STRATEGIES if s != "aten"]

# (input size, weight size, stride, padding, output_padding, dilation, groups):
# U-Net's kernel = stride, a GAN generator's k4 s2 p1, the VAE decoder's
# k3 s2 p1 op1 (scaled), 1D and 3D, groups, dilation.
CASES = [
    ((2, 4, 6, 5), (4, 3, 2, 2), [2, 2], [0, 0], [0, 0], [1, 1], 1),
    ((1, 6, 4, 4), (6, 2, 4, 4), [2, 2], [1, 1], [0, 0], [1, 1], 1),
    ((1, 8, 5, 6), (8, 4, 3, 3), [2, 2], [1, 1], [1, 1], [1, 1], 1),
    ((2, 3, 7), (3, 2, 3), [3], [1], [2], [1], 1),
    ((1, 4, 3, 4, 3), (4, 2, 2, 2, 2), [2, 2, 2], [0, 0, 0], [0, 1, 0], [1, 1, 1], 1),
    ((2, 4, 5, 5), (4, 3, 3, 2), [2, 3], [1, 0], [1, 2], [2, 1], 2),
    ((1, 6, 7), (6, 1, 1), [2], [0], [1], [1], 3),
]


def operands(case, dtype=torch.float64, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(case[0], generator=g, dtype=dtype)
    w = torch.randn(case[1], generator=g, dtype=dtype)
    b = torch.randn(case[1][1] * case[6], generator=g, dtype=dtype)
    return x, w, b


def aten_transposed(x, w, b, case):
    _, _, stride, padding, output_padding, dilation, groups = case
    return torch.ops.aten.convolution(x, w, b, stride, padding, dilation, True, output_padding,
                                      groups)


def ours(x, w, b, case):
    _, _, stride, padding, output_padding, dilation, groups = case
    return torch.ops.bwdconv.conv_transpose(x, w, b, stride, padding, output_padding, groups,
                                            dilation)


def random_case(rng):
    """A valid transposed convolution with 1-3 spatial dims; half of them
    with the filter within the stride (kernel = stride among them)."""
    dims = rng.randint(1, 3)
    groups = rng.choice([1, 1, 2])
    s = [rng.randint(1, 4) for _ in range(dims)]
    within = rng.random() < 0.5
    d = [1 if within else rng.randint(1, 2) for _ in range(dims)]
    k = [rng.randint(1, s[i]) if within else rng.randint(1, 4) for i in range(dims)]
    p = [rng.randint(0, (d[i] * (k[i] - 1)) // 2) for i in range(dims)]
    op = [rng.randint(0, max(s[i], d[i]) - 1) for i in range(dims)]
    op = [min(op[i], s[i] - 1) for i in range(dims)]  # aten: below stride or dilation
    size = [rng.randint(1, 5) for _ in range(dims)]
    c, o, n = groups * rng.randint(1, 3), groups * rng.randint(1, 2), rng.randint(1, 2)
    return (n, c, *size), (c, o // groups, *k), s, p, op, d, groups


def planned_with(strategy, case):
    x_size, w_size, s, p, op, d, groups = case
    plan = bwdconv.explain(list(x_size), list(w_size), s, p, d, groups, transposed=True,
                           output_padding=op)
    return plan.serves(strategy, "input")


@pytest.mark.parametrize("strategy", INPUT_STRATEGIES)
def test_forward_of_every_strategy_matches_aten_on_a_random_grid(strategy):
    rng = random.Random(GRID_SEED + INPUT_STRATEGIES.index(strategy))
    checked = 0
    for trial in range(200):
        case = random_case(rng)
        if not planned_with(strategy, case):
            continue
        x, w, b = operands(case, seed=trial)
        with bwdconv.force_strategy(strategy):
            got = ours(x, w, b, case)
        torch.testing.assert_close(got, aten_transposed(x, w, b, case), rtol=1e-10, atol=1e-10,
                                   msg=f"strategy {strategy} trial {trial} case {case}")
        checked += 1
    assert checked >= 60, f"only {checked} shapes were servable by {strategy}"


def test_the_grid_gives_swap1x1_kernel_equal_to_stride():
    rng = random.Random(GRID_SEED)
    cases = [random_case(rng) for _ in range(200)]
    assert any(c[1][2:] == tuple(c[2]) and min(c[2]) > 1 and planned_with("swap1x1", c)
               for c in cases)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("strategy", [None] + STRATEGIES)
def test_gradients_of_every_argument_match_aten(case, strategy):
    x, w, b = operands(case)
    expected_y = aten_transposed(x, w, b, case)
    dy = torch.randn_like(expected_y)
    expected = torch.autograd.grad(aten_transposed(*(t.requires_grad_() for t in (x, w, b)), case),
                                   (x, w, b), dy)
    x, w, b = (t.detach().requires_grad_() for t in (x, w, b))
    with bwdconv.force_strategy(strategy):
        y = ours(x, w, b, case)
        got = torch.autograd.grad(y, (x, w, b), dy)
    torch.testing.assert_close(y, expected_y, rtol=1e-10, atol=1e-10)
    for a, e in zip(got, expected, strict=True):
        torch.testing.assert_close(a, e, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("case", CASES[:3] + CASES[4:5])
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_gradcheck_and_gradgradcheck(case, strategy):
    """Fast mode, as test_ops and test_strategies check theirs: each Jacobian
    projected on random vectors, which a wrong one of these (bi)linear maps
    misses with probability zero, where the full Jacobians took one forward
    per element of every operand and gradient (up to 135 s a case)."""
    x, w, b = (t.requires_grad_() for t in operands(case))
    with bwdconv.force_strategy(strategy):
        assert torch.autograd.gradcheck(lambda *a: ours(*a, case), (x, w, b), fast_mode=True)
        assert torch.autograd.gradgradcheck(lambda *a: ours(*a, case), (x, w, b),
                                            fast_mode=True)


@pytest.mark.parametrize("case", CASES[:3] + CASES[4:5])
@pytest.mark.parametrize("channels_last", [False, True])
def test_opcheck(case, channels_last):
    x, w, b = (t.requires_grad_() for t in operands(case, torch.float32))
    if channels_last and x.dim() in (4, 5):
        layout = torch.channels_last if x.dim() == 4 else torch.channels_last_3d
        x = x.detach().contiguous(memory_format=layout).requires_grad_()
    _, _, stride, padding, output_padding, dilation, groups = case
    opcheck(torch.ops.bwdconv.conv_transpose,
            (x, w, b, stride, padding, output_padding, groups, dilation))


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("strategy", FORWARD_STRATEGIES)
def test_a_strategys_forward_is_laid_out_as_its_fake(strategy, dtype):
    """A strategy's transposed forward has the strides aten's backend gives,
    which the op's fake (aten's) gives too: on the CPU a 3-D channels_last
    call in float64 is contiguous there (the random compiled test's seed 108,
    case 23, phase_stacked forced)."""
    layout = torch.channels_last_3d
    x = torch.randn(2, 4, 6, 8, 4, dtype=dtype).contiguous(memory_format=layout)
    w = torch.randn(4, 4, 3, 4, 2, dtype=dtype).contiguous(memory_format=layout)
    args = (x, w, torch.randn(4, dtype=dtype), [2, 1, 2], [1, 2, 1], [0, 0, 1], 1, [1, 1, 1])
    with bwdconv.force_strategy(strategy):
        opcheck(torch.ops.bwdconv.conv_transpose, args, test_utils="test_faketensor")
        expected = torch.ops.aten.convolution(*args[:3], args[3], args[4], args[7], True,
                                              args[5], args[6])
        assert torch.ops.bwdconv.conv_transpose(*args).stride() == expected.stride()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("strategy", FORWARD_STRATEGIES)
def test_lower_precision_forward_meets_the_accuracy_rule(dtype, channels_last, strategy):
    case = CASES[0] if strategy == "swap1x1" else CASES[2]
    x64, w64, b64 = operands(case)
    reference = aten_transposed(x64, w64, b64, case)
    x, w, b = (t.to(dtype) for t in (x64, w64, b64))
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    expected = aten_transposed(x, w, b, case)
    if strategy == "relayout" and channels_last:  # aten in the layout it has
        with bwdconv.force_strategy(strategy, strict=True):
            with pytest.raises(ValueError, match="channels_last already"):
                ours(x, w, b, case)
        return
    with bwdconv.force_strategy(strategy, strict=True):
        got = ours(x, w, b, case)
    assert got.dtype == dtype and got.shape == expected.shape
    assert got.is_contiguous(memory_format=torch.channels_last) == channels_last
    aten_error = (expected.double() - reference).abs().max().item()
    error = (got.double() - reference).abs().max().item()
    # The bias is added to the strategy's rounded result: one more rounding
    # than aten's, at most one unit in the last place (docs/DESIGN.md,
    # "Transposed convolutions").
    bias_rounding = torch.finfo(dtype).eps * reference.abs().max().item()
    assert error <= 2 * aten_error + bias_rounding, (error, aten_error)
    without_bias = aten_transposed(x64, w64, None, case)
    with bwdconv.force_strategy(strategy, strict=True):
        error = (ours(x, w, None, case).double() - without_bias).abs().max().item()
    aten_error = (aten_transposed(x, w, None, case).double() - without_bias).abs().max().item()
    assert error <= 2 * aten_error + 1e-5 * without_bias.abs().max().item(), (error, aten_error)


def channels_last_if(x, wanted):
    if not wanted or x.dim() not in (4, 5):
        return x
    return x.contiguous(memory_format=torch.channels_last if x.dim() == 4
                        else torch.channels_last_3d)


def gradients_through(function, x, w, b, case):
    """(output, dx, dw, db) of function(x, w, b) with the case's arguments,
    for a fixed output gradient."""
    _, _, stride, padding, output_padding, dilation, groups = case
    x, w, b = (t.detach().requires_grad_() for t in (x, w, b))
    y = function(x, w, b, stride, padding, output_padding, groups, dilation)
    dy = torch.linspace(-1, 1, y.numel(), dtype=y.dtype).reshape(y.shape)
    return (y, *torch.autograd.grad(y, (x, w, b), dy))


@pytest.mark.parametrize("scope", ["functional", "aten"])
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_random_grid_matches_aten_in_both_scopes_with_every_strategy_forced(scope, strategy):
    """Random transposed convolutions (1-3D, groups, dilation, output_padding,
    strides 1-4, both layouts) through F.conv_transpose*d in float64: the
    output and every gradient equal aten's to 1e-9, and the forced strategy
    computes wherever it serves."""
    rng = random.Random(GRID_SEED + 7 * STRATEGIES.index(strategy) + (scope == "aten"))
    gradient = "weight" if strategy == "splitk" else "input"
    served_cases = 0
    bwdconv.reset_served()
    for trial in range(40):
        case = random_case(rng)
        x, w, b = operands(case, seed=trial)
        last = rng.random() < 0.5 and x.dim() in (4, 5)
        x = channels_last_if(x, last)
        name = f"conv_transpose{len(case[2])}d"  # looked up after enable() replaced it
        expected = gradients_through(getattr(F, name), x, w, b, case)
        with bwdconv.enabled(scope), bwdconv.force_strategy(strategy):
            got = gradients_through(getattr(F, name), x, w, b, case)
        for name, a, e in zip(("output", "dx", "dw", "db"), got, expected, strict=True):
            torch.testing.assert_close(a, e, rtol=1e-9, atol=1e-9,
                                       msg=f"{name}, {strategy} in the {scope} scope, {case}")
        x_size, w_size, s, p, op, d, groups = case
        plan = bwdconv.explain(list(x_size), list(w_size), s, p, d, groups, transposed=True,
                               output_padding=op, channels_last=last)
        served_cases += plan.serves(strategy, gradient)
    assert served_cases >= 8, f"{strategy} served only {served_cases} of 40 cases"
    # A transposed convolution's forward is the matching input gradient.
    served_as = "forward" if gradient == "input" else gradient
    assert bwdconv.served()[served_as][strategy] >= served_cases


def module_step(module, x):
    module.zero_grad(set_to_none=True)
    x = x.detach().requires_grad_()
    y = module(x)
    y.square().sum().backward()
    return [y, x.grad] + [p.grad for p in module.parameters()]


MODULES = [
    (lambda: nn.ConvTranspose2d(8, 4, 2, stride=2), (2, 8, 5, 6)),
    (lambda: nn.ConvTranspose2d(6, 3, 4, stride=2, padding=1, bias=False), (1, 6, 4, 5)),
    (lambda: nn.ConvTranspose2d(8, 4, 3, stride=2, padding=1, output_padding=1), (1, 8, 5, 5)),
    (lambda: nn.ConvTranspose1d(4, 4, 3, stride=2, groups=2, dilation=2), (2, 4, 7)),
    (lambda: nn.ConvTranspose3d(4, 2, 2, stride=2), (1, 4, 3, 3, 2)),
]


@pytest.mark.parametrize("scope", ["functional", "aten"])
@pytest.mark.parametrize("strategy", [None] + FORWARD_STRATEGIES)
@pytest.mark.parametrize("index", range(len(MODULES)))
def test_modules_match_aten_in_both_scopes(scope, strategy, index):
    make, size = MODULES[index]
    torch.manual_seed(index)
    module, x = make().double(), torch.randn(size, dtype=torch.double)
    expected = module_step(module, x)
    with bwdconv.enabled(scope), bwdconv.force_strategy(strategy):
        got = module_step(module, x)
    for a, e in zip(got, expected, strict=True):
        torch.testing.assert_close(a, e, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("scope", ["functional", "aten"])
@pytest.mark.parametrize("mode", ["no_grad", "inference_mode"])
def test_inference_forward_is_planned(scope, mode):
    module = nn.ConvTranspose2d(8, 4, 2, stride=2).eval()
    x = torch.randn(1, 8, 6, 6)
    expected = module(x)
    bwdconv.reset_served()
    context = torch.no_grad() if mode == "no_grad" else torch.inference_mode()
    with bwdconv.enabled(scope), bwdconv.force_strategy("swap1x1"), context:
        got = module(x)
    assert bwdconv.served()["forward"]["swap1x1"] == 1
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("scope", ["functional", "aten"])
def test_a_forward_planned_for_aten_is_atens_own(scope):
    module = nn.ConvTranspose2d(8, 4, 3, stride=2, padding=1)
    x = torch.randn(1, 8, 5, 5, requires_grad=True)
    expected = module_step(module, x)
    bwdconv.reset_served()
    with bwdconv.enabled(scope):
        got = module_step(module, x)
    assert bwdconv.served()["forward"]["aten"] == 1
    for a, e in zip(got, expected, strict=True):
        torch.testing.assert_close(a, e, rtol=0, atol=0)


BAD_CALLS = [
    ("output_padding not smaller than stride or dilation",
     (torch.randn(1, 4, 5, 5), torch.randn(4, 2, 3, 3)), {"stride": 2, "output_padding": 2}),
    ("channels that do not match the weight",
     (torch.randn(1, 3, 5, 5), torch.randn(4, 2, 3, 3)), {"stride": 2}),
    ("groups that do not divide the channels",
     (torch.randn(1, 4, 5, 5), torch.randn(4, 2, 3, 3)), {"stride": 2, "groups": 3}),
    ("a bias of the wrong size",
     (torch.randn(1, 4, 5, 5), torch.randn(4, 2, 3, 3), torch.randn(3)), {"stride": 2}),
    ("a weight of the wrong rank",
     (torch.randn(1, 4, 5, 5), torch.randn(4, 2, 3)), {"stride": 2}),
    ("a negative padding",
     (torch.randn(1, 4, 5, 5), torch.randn(4, 2, 3, 3)), {"stride": 2, "padding": -1}),
]


def raised(fn, *args, **kwargs):
    try:
        fn(*args, **kwargs)
    except Exception as error:  # noqa: BLE001 - the exception itself is compared
        return type(error), str(error)
    return None


@pytest.mark.parametrize("scope", ["functional", "aten"])
@pytest.mark.parametrize("what,args,kwargs", BAD_CALLS, ids=[c[0] for c in BAD_CALLS])
def test_bad_arguments_raise_pytorchs_own_error(scope, what, args, kwargs):
    args = tuple(a.requires_grad_() for a in args)
    expected = raised(F.conv_transpose2d, *args, **kwargs)
    assert expected is not None, what
    with bwdconv.enabled(scope), bwdconv.force_strategy("phase"):
        assert raised(F.conv_transpose2d, *args, **kwargs) == expected


# Outputs with an empty or a negative spatial size (aten makes the first and
# refuses the second with its backend's message).
EMPTY_OR_NEGATIVE = {
    "empty": ((2, 1, 9, 4), (1, 2, 3, 1), {"stride": (2, 1), "padding": (1, 2)}),
    "negative": ((2, 4, 1, 9), (4, 2, 1, 4), {"stride": (2, 1), "padding": (2, 2),
                                              "dilation": (2, 1)}),
}


@pytest.mark.parametrize("scope", ["functional", "aten"])
@pytest.mark.parametrize("strategy", FORWARD_STRATEGIES)
@pytest.mark.parametrize("name", EMPTY_OR_NEGATIVE)
def test_empty_and_negative_outputs_are_atens_whatever_is_forced(scope, strategy, name):
    x_size, w_size, kwargs = EMPTY_OR_NEGATIVE[name]

    def call(grad):
        torch.manual_seed(0)
        x, w = torch.randn(x_size), torch.randn(w_size)
        with torch.set_grad_enabled(grad):
            y = F.conv_transpose2d(x.requires_grad_(grad), w, **kwargs)
        return tuple(y.shape), y.stride()

    for grad in (False, True):
        expected = raised(call, grad) or call(grad)
        with bwdconv.enabled(scope), bwdconv.force_strategy(strategy):
            assert (raised(call, grad) or call(grad)) == expected


# 3-D transposed convolutions that aten's CPU backend writes contiguous from
# channels_last operands, where PyTorch's meta rule (bwdconv's ops) says
# channels_last: float64 (the slow path), and a one-channel float32 input.
SLOW_PATH_LAYOUTS = {
    "float64": ((2, 4, 3, 4, 3), (4, 2, 2, 2, 2), torch.float64, True),
    "float32, one input channel": ((1, 1, 5, 4, 5), (1, 3, 4, 3, 1), torch.float32, False),
}


@pytest.mark.parametrize("scope", ["functional", "aten"])
@pytest.mark.parametrize("strategy", FORWARD_STRATEGIES)
@pytest.mark.parametrize("name", SLOW_PATH_LAYOUTS)
def test_a_strategys_output_takes_atens_layout(scope, strategy, name):
    x_size, w_size, dtype, input_channels_last = SLOW_PATH_LAYOUTS[name]
    x = torch.randn(x_size, dtype=dtype)
    if input_channels_last:
        x = x.to(memory_format=torch.channels_last_3d)
    w = torch.randn(w_size, dtype=dtype).to(memory_format=torch.channels_last_3d)
    expected = F.conv_transpose3d(x, w, stride=2, padding=1)
    assert expected.is_contiguous()
    serves = bwdconv.explain(x, w, 2, 1, transposed=True).serves(strategy, "input")
    for grad in (False, True):
        bwdconv.reset_served()
        with bwdconv.enabled(scope), bwdconv.force_strategy(strategy):
            got = F.conv_transpose3d(x.detach().requires_grad_(grad), w, stride=2, padding=1)
        assert got.stride() == expected.stride()
        torch.testing.assert_close(got, expected)
        assert bwdconv.served()["forward"][strategy] == int(serves)


def test_unbatched_input_matches_aten():
    x, w = torch.randn(4, 5, 5, dtype=torch.double), torch.randn(4, 2, 2, 2, dtype=torch.double)
    expected = F.conv_transpose2d(x, w, stride=2)
    with bwdconv.enabled(), bwdconv.force_strategy("swap1x1"):
        got = F.conv_transpose2d(x, w, stride=2)
    torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("strategy", [None, "swap1x1"])
def test_compiled_fullgraph_forward_and_backward(strategy):
    torch.manual_seed(0)
    model = nn.Sequential(nn.ConvTranspose2d(8, 4, 2, stride=2), nn.ReLU(),
                          nn.ConvTranspose2d(4, 2, 3, stride=2, padding=1, output_padding=1))
    x = torch.randn(2, 8, 5, 5)
    expected = module_step(model, x)
    torch._dynamo.reset()
    with bwdconv.enabled(), bwdconv.force_strategy(strategy):
        compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
        got = module_step(compiled, x)
    for a, e in zip(got, expected, strict=True):
        torch.testing.assert_close(a, e, rtol=1e-4, atol=1e-5)


def test_autocast_casts_like_atens_transposed_convolution():
    x, w = torch.randn(1, 4, 5, 5), torch.randn(4, 2, 2, 2)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        expected = F.conv_transpose2d(x, w, stride=2)
        with bwdconv.enabled(), bwdconv.force_strategy("swap1x1"):
            bwdconv.reset_served()
            got = F.conv_transpose2d(x, w, stride=2)
    assert got.dtype == expected.dtype == torch.bfloat16
    assert bwdconv.served()["forward"]["swap1x1"] == 1
    torch.testing.assert_close(got.float(), expected.float(), rtol=2e-2, atol=2e-2)


def test_explain_names_the_transposed_forward_and_keys_it_apart():
    plain = bwdconv.explain([1, 4, 10, 10], [8, 4, 2, 2], 2)
    transposed = bwdconv.explain([1, 8, 5, 5], [8, 4, 2, 2], 2, transposed=True)
    assert transposed.to_dict()["input_size"] == [1, 4, 10, 10]
    assert "conv_transpose2d" in str(transposed) and "conv_transpose2d" not in str(plain)
    assert transposed.serves("swap1x1", "input")


def test_explain_model_lists_transposed_layers_with_their_forward():
    model = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2), nn.ConvTranspose2d(8, 4, 2, stride=2))
    with bwdconv.force_strategy("swap1x1"):
        explanation = bwdconv.explain_model(model, torch.randn(1, 3, 9, 9))
    conv, transposed = explanation.layers
    assert not conv["transposed"] and conv["forward"] == "aten"
    assert transposed["transposed"] and transposed["forward"] == "swap1x1"
    assert transposed["input"] == "aten"  # a forward convolution
    assert explanation.counts()["forward"] == {"swap1x1": 1}
    assert "(transposed)" in str(explanation)


def test_explain_model_counts_what_a_decoders_step_serves():
    """counts() is served()'s count after one step: a transposed layer's input
    gradient, a forward convolution bwdconv does not plan, in neither."""
    model = nn.Sequential(nn.ConvTranspose2d(4, 8, 2, stride=2), nn.Conv2d(8, 8, 3, padding=1),
                          nn.ConvTranspose2d(8, 3, 4, stride=2, padding=1))
    x = torch.randn(2, 4, 5, 6, requires_grad=True)
    with bwdconv.force_strategy("phase"):
        counts = bwdconv.explain_model(model, x).counts()
        bwdconv.reset_served()
        with bwdconv.enabled():
            model(x).square().mean().backward()
    served = {g: {s: n for s, n in c.items() if n} for g, c in bwdconv.served().items()}
    assert served == counts and counts["input"] == {"phase": 1}  # the Conv2d's alone


def test_autotuning_a_transposed_training_step_tunes_forward_and_weight(fresh_tuning):
    import warnings

    from bwdconv import _tune

    module = nn.ConvTranspose2d(8, 4, 2, stride=2).double()
    x = torch.randn(2, 8, 6, 6, dtype=torch.double)
    expected = module_step(module, x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the tuner warns when it fails
        with bwdconv.enabled(), _tune.autotuning():
            for _ in range(2):
                got = module_step(module, x)
    keys = list(bwdconv.decisions())
    for a, e in zip(got, expected, strict=True):
        torch.testing.assert_close(a, e, rtol=1e-10, atol=1e-10)
    assert any("transposed forward" in k for k in keys), keys
    assert any(k.endswith("grads weight") for k in keys), keys


@pytest.mark.parametrize("scope", ["functional", "aten"])
def test_a_transposed_forward_autograd_records_is_timed_with_its_backward(fresh_tuning,
                                                                          monkeypatch, scope):
    """In training, a transposed forward's candidates are timed as the step
    they start: each forward, then aten's backward of the convolution. Under
    no_grad, the forward alone."""
    from bwdconv import _tune

    steps = []
    real = _tune._then_backward

    def watched(*args):
        step = real(*args)
        return lambda: steps.append(step())
    monkeypatch.setattr(_tune, "_then_backward", watched)
    x = torch.randn(2, 8, 6, 6, requires_grad=True)
    w = torch.randn(8, 4, 2, 2, requires_grad=True)
    with bwdconv.enabled(scope), _tune.autotuning():
        F.conv_transpose2d(x, w, None, 2)
        (trained,) = bwdconv.decisions().values()
        assert trained["timed"] == "the transposed forward, then aten's backward of it"
        assert steps and all(s[0].shape == x.shape and s[1].shape == w.shape for s in steps)
        steps.clear()
        bwdconv.clear_decisions()
        with torch.no_grad():
            F.conv_transpose2d(x, w, None, 2)
    (inference,) = bwdconv.decisions().values()
    assert "timed" not in inference and not steps


def test_the_backward_timed_after_a_transposed_forward_is_pytorchs():
    from bwdconv import _tune

    x = torch.randn(2, 8, 6, 6, dtype=torch.double, requires_grad=True)
    w = torch.randn(8, 4, 3, 3, dtype=torch.double, requires_grad=True)
    out = F.conv_transpose2d(x, w, None, 2, 1, 1)
    grad = torch.randn_like(out)
    request = {"grad_output": x, "weight": w}
    dx, dw, _ = _tune._then_backward(lambda: None, request, ([2, 2], [1, 1], [1, 1], 1), grad)()
    expected = torch.autograd.grad(out, (x, w), grad)
    torch.testing.assert_close((dx, dw), expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("scope", ["functional", "aten"])
def test_training_and_inference_decide_a_transposed_forward_apart(fresh_tuning, scope):
    """A decision tuned in training (its backward timed after it) does not
    serve the same forward under no_grad, nor the other way round: each
    context is tuned once and keeps its own choice."""
    from bwdconv import _tune

    x = torch.randn(2, 8, 6, 6, requires_grad=True)
    w = torch.randn(8, 4, 2, 2, requires_grad=True)
    expected = torch.ops.aten.convolution(x.detach(), w.detach(), None, [2, 2], [0, 0], [1, 1],
                                          True, [0, 0], 1)

    def forward(timed):
        _tune._state.timer = lambda gradient, label: timed.get(label, 1.0)
        bwdconv.reset_served()
        out = F.conv_transpose2d(x, w, None, 2)
        torch.testing.assert_close(out.detach(), expected)
        return {s: n for s, n in bwdconv.served(measured=True)["forward"].items() if n}

    with bwdconv.enabled(scope), _tune.autotuning():
        assert forward({"aten": 2e-3, "phase": 1e-3}) == {"phase": 1}
        with torch.no_grad():
            assert forward({"aten": 1e-3, "phase": 2e-3}) == {"aten": 1}
        assert forward({}) == {"phase": 1}  # each context tuned once
        with torch.no_grad():
            assert forward({}) == {"aten": 1}
    entries = bwdconv.decisions()
    assert len(entries) == 2
    for key, entry in entries.items():
        trained = key.endswith("(transposed forward, its backward after it)")
        assert entry["gradients"]["input"]["choice"] == ("phase" if trained else "aten"), key
    args = (x, w, 2)
    assert bwdconv.explain(*args, transposed=True, training=True).input_strategy == "phase"
    assert bwdconv.explain(*args, transposed=True).input_strategy == "aten"


def test_relayout_refuses_cpu_bfloat16_in_3d_where_channels_last_3d_goes_wrong():
    """PyTorch's CPU bfloat16 weight gradient in channels_last_3d is wrong on
    this shape where the NCDHW one is right (docs/limitations.md): relayout
    refuses it, so a forced relayout leaves it to aten in its own layout."""
    x_size, w_size = [1, 4, 4, 6, 2], [4, 6, 4, 4, 5]
    args = ([1, 2, 1], [3, 0, 0], [1, 1, 2], 4)
    plan = bwdconv.explain(x_size, w_size, *args, transposed=True, dtype=torch.bfloat16)
    assert not plan.serves("relayout", "weight") and not plan.serves("relayout", "input")
    assert "3D bfloat16 on the CPU" in str(plan)
    # In float32 relayout refuses this shape for its padding, which reaches
    # the (matching convolution's) input depth of 1 (random seed 632).
    float32 = bwdconv.explain(x_size, w_size, *args, transposed=True, dtype=torch.float32)
    assert not float32.serves("relayout", "weight")
    assert "padding at least the input's size" in str(float32)
    g = torch.Generator().manual_seed(0)
    x64 = torch.randn(x_size, generator=g, dtype=torch.float64)
    w64 = torch.randn(w_size, generator=g, dtype=torch.float64)

    def weight_gradient(x, w):
        w = w.detach().requires_grad_()
        F.conv_transpose3d(x, w, None, args[0], args[1], 0, args[3], args[2]).sum().backward()
        return w.grad
    reference = weight_gradient(x64, w64)
    theirs = weight_gradient(x64.bfloat16(), w64.bfloat16())
    bwdconv.enable()
    with bwdconv.force_strategy("relayout"):
        ours = weight_gradient(x64.bfloat16(), w64.bfloat16())
    error = lambda t: (t.double() - reference).abs().max().item()  # noqa: E731
    assert error(ours) <= 2 * error(theirs) + 1e-5 * reference.abs().max().item()
