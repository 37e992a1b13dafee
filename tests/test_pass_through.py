"""The functional scope's pass-through (docs/DESIGN.md, "Pass-through"): a
call whose backward is planned for aten goes to PyTorch's own function and
node; a call with a strategy planned, or tuning pending, takes bwdconv's op."""

import pytest
import torch
import torch.autograd.forward_ad as fwAD
import torch.nn.functional as F

import bwdconv
from bwdconv import _tune
from bwdconv._library import _C

OP_NODE = "torch::autograd::CppNode<bwdconv::ops::"

# (spatial dims, input shape, weight shape, args, kwargs): argument forms a
# user writes, every one a convolution the rules plan aten for on the CPU in
# float32 and phase can serve (stride 2 somewhere) or not (stride 1).
CALLS = [
    (2, (2, 4, 9, 9), (6, 4, 3, 3), (None, 2, 1), {}),
    (2, (2, 4, 9, 9), (6, 4, 3, 3), (), {"stride": (2, 1), "padding": [1, 0]}),
    (2, (2, 4, 9, 9), (6, 2, 3, 3), (), {"bias": None, "stride": 2, "groups": 2,
                                         "dilation": 2}),
    (2, (4, 9, 9), (6, 4, 3, 3), (None, [2]), {}),  # unbatched
    (2, (2, 4, 9, 9), (6, 4, 3, 3), (), {"padding": "same"}),
    (2, (2, 4, 9, 9), (6, 4, 3, 3), (), {"padding": "valid", "stride": 2}),
    (1, (2, 3, 11), (5, 3, 4), (None, 3, 2, 2), {}),
    (3, (1, 2, 6, 7, 5), (4, 2, 3, 2, 3), (None, (2, 1, 2)), {"padding": 1}),
]


def operands(call, dtype=torch.float32, channels_last=False, bias=True):
    dims, x_shape, w_shape, args, kwargs = call
    g = torch.Generator().manual_seed(0)
    x = torch.randn(x_shape, generator=g, dtype=dtype)
    w = torch.randn(w_shape, generator=g, dtype=dtype)
    if channels_last and x.dim() == 4:
        x = x.contiguous(memory_format=torch.channels_last)
    b = torch.randn(w_shape[0], generator=g, dtype=dtype) if bias else None
    for t in (x, w, b):
        if t is not None:
            t.requires_grad_(True)
    if args:
        args = (args[0] if args[0] is not None else b,) + args[1:]
    elif bias:
        kwargs = dict(kwargs, bias=b)
    return x, w, args, kwargs


def convolution(dims):
    return getattr(F, f"conv{dims}d")


def node_names(out):
    """The names of every node of out's graph."""
    names, pending = [], [out.grad_fn]
    while pending:
        node = pending.pop()
        if node is not None:
            names.append(node.name())
            pending += [n for n, _ in node.next_functions]
    return names


def step(call, x, w, args, kwargs):
    """(graph's node names, output, gradients of the operands) of one forward and backward."""
    for t in (x, w, *args, *kwargs.values()):
        if isinstance(t, torch.Tensor):
            t.grad = None
    out = convolution(call[0])(x, w, *args, **kwargs)
    out.backward(torch.randn(out.shape, generator=torch.Generator().manual_seed(1),
                             dtype=out.dtype))
    grads = [t.grad for t in (x, w, *args, *kwargs.values()) if isinstance(t, torch.Tensor)]
    return node_names(out), out, grads


@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("call", CALLS)
def test_a_call_planned_for_aten_is_pytorchs_own_bit_for_bit(call, channels_last):
    x, w, args, kwargs = operands(call, channels_last=channels_last)
    expected_node, expected_out, expected = step(call, x, w, args, kwargs)
    bwdconv.enable()
    node, out, grads = step(call, x, w, args, kwargs)
    assert node == expected_node
    assert "ConvolutionBackward0" in node
    for a, b in zip([out] + grads, [expected_out] + expected):
        assert a.stride() == b.stride()
        assert torch.equal(a, b)


@pytest.mark.filterwarnings("ignore:Using padding='same'")
@pytest.mark.parametrize("call", [c for c in CALLS if c[4].get("padding") != "same"])
def test_a_call_a_strategy_serves_takes_bwdconvs_op(call):
    x, w, args, kwargs = operands(call)
    _, _, expected = step(call, x, w, args, kwargs)
    bwdconv.enable()
    bwdconv.reset_served()
    with bwdconv.force_strategy("phase"):
        node, _, grads = step(call, x, w, args, kwargs)
    assert any(name.startswith(OP_NODE) for name in node)
    assert bwdconv.served()["input"]["phase"] == 1
    for a, b in zip(grads, expected):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)


TRANSPOSED_CALLS = [  # (spatial dims, input shape, weight shape, args, kwargs)
    (2, (2, 4, 5, 5), (4, 3, 3, 3), (None, 2, 1, 1), {}),
    (2, (4, 5, 5), (4, 3, 3, 3), (), {"stride": 2}),  # unbatched
]


@pytest.mark.parametrize("transposed", [False, True])
def test_a_planned_call_is_made_in_cpp_unless_only_python_reads_it(monkeypatch, transposed):
    """bwdconv's op takes a planned call from the C++ router, with no Python
    in between; an unbatched input, which only bwdconv's Python wrapper
    reads, goes through the wrapper."""
    from bwdconv import functional

    taken = []
    python_path = functional._python_path
    monkeypatch.setattr(functional, "_python_path",
                        lambda *a: taken.append(a[1]) or python_path(*a))
    bwdconv.enable()
    calls = TRANSPOSED_CALLS if transposed else \
        [c for c in CALLS if c[4].get("padding") != "same"]
    for call in calls:
        dims, x_shape, w_shape, args, kwargs = call
        x = torch.randn(x_shape, requires_grad=True)
        w = torch.randn(w_shape, requires_grad=True)
        name = f"conv_transpose{dims}d" if transposed else f"conv{dims}d"
        expected = getattr(functional, "transposed_originals" if transposed else "originals")[
            dims](x, w, *args, **kwargs)
        taken.clear()
        with bwdconv.force_strategy("phase"):
            out = getattr(F, name)(x, w, *args, **kwargs)
        assert any(n.startswith(OP_NODE) for n in node_names(out)), call
        assert taken == ([dims] if len(x_shape) == dims + 1 else []), call
        torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("transposed", [False, True])
def test_a_warning_raised_in_the_routers_cpp_is_a_python_warning(fresh_tuning, monkeypatch,
                                                                 transposed):
    """The tuning hook's TORCH_WARN reaches Python's warnings (not stderr):
    raised in the router, which tunes a transposed forward, or in the
    backward, which tunes a convolution's gradients."""
    def fails(*args):
        raise ValueError("planted")
    monkeypatch.setattr(_tune, "_measure", fails)
    x = torch.randn(2, 4, 9, 9, requires_grad=True)
    w = torch.randn(4, 4, 3, 3, requires_grad=True)
    bwdconv.enable()
    with _tune.autotuning(), pytest.warns(UserWarning, match="autotuner failed.*planted"):
        out = (F.conv_transpose2d if transposed else F.conv2d)(x, w, None, 2)
        if not transposed:
            out.sum().backward()


class FunctionsSeen(torch.overrides.TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.functions = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.functions.append(str(func))
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("transposed", [False, True])
def test_a_torch_function_mode_sees_the_op_a_planned_call_takes(transposed):
    x = torch.randn(2, 4, 9, 9, requires_grad=True)
    w = torch.randn(4, 4, 3, 3, requires_grad=True)
    bwdconv.enable()
    with bwdconv.force_strategy("phase"), FunctionsSeen() as mode:
        out = (F.conv_transpose2d if transposed else F.conv2d)(x, w, None, 2)
    assert out.grad_fn.name().startswith(OP_NODE)
    assert any("bwdconv" in f for f in mode.functions), mode.functions


def test_served_counts_the_gradients_a_pass_through_call_needs():
    call = CALLS[0]
    x, w, args, kwargs = operands(call, bias=False)
    bwdconv.enable()
    bwdconv.reset_served()
    step(call, x, w, args, kwargs)
    counts = bwdconv.served()
    assert (counts["input"]["aten"], counts["weight"]["aten"]) == (1, 1)
    bwdconv.reset_served()
    step(call, x.detach(), w, args, kwargs)  # only the weight needs a gradient
    counts = bwdconv.served()
    assert (counts["input"]["aten"], counts["weight"]["aten"]) == (0, 1)


def test_with_both_scopes_the_aten_scope_counts_once():
    call = CALLS[0]
    x, w, args, kwargs = operands(call, bias=False)
    bwdconv.enable()
    bwdconv.enable("aten")
    bwdconv.reset_served()
    step(call, x, w, args, kwargs)
    counts = bwdconv.served()
    assert (counts["input"]["aten"], counts["weight"]["aten"]) == (1, 1)


class Subclass(torch.Tensor):
    pass


def python_eligibility_cases(rules="router"):
    """(name, make (x, w) and call F.conv2d's route under the state it sets).
    `rules`: whose eligibility decides, the C++ router's (eager calls) or
    the Python path's (bwdconv.functional._plans: traced calls and the
    calls only Python reads), the same rules written in both languages."""
    from bwdconv import functional

    x = torch.randn(2, 4, 9, 9, requires_grad=True)
    w = torch.randn(6, 4, 3, 3, requires_grad=True)
    args = (None, 2, 1)

    def route(spatial_dims, args, kwargs):  # whether the call goes to the original
        if rules == "python":
            return not functional._plans(*functional._arguments(*args, **kwargs)[:3])
        return _C.functional_call(spatial_dims, args, kwargs) is None

    def plain():
        return route(2, (x, w, *args), {})

    def parameter():
        return route(2, (x, torch.nn.Parameter(w.detach()), *args), {})

    def subclass():
        return route(2, (x.detach().as_subclass(Subclass).requires_grad_(), w, *args), {})

    def integer():
        return route(2, (x.detach().long(), w.detach().long(), *args), {})

    def zero_size():
        return route(2, (torch.randn(0, 4, 9, 9, requires_grad=True), w, *args), {})

    def no_gradient():
        return route(2, (x.detach(), w.detach(), *args), {})

    def no_grad():
        with torch.no_grad():
            return route(2, (x, w, *args), {})

    def inference_mode():
        with torch.inference_mode():
            return route(2, (x, w, *args), {})

    def meta():
        return route(2, (x.to("meta"), w.to("meta"), *args), {})

    def forward_ad():
        with fwAD.dual_level():
            return route(2, (x, w, *args), {})

    def vmap():
        seen = []
        torch.func.vmap(lambda xi: seen.append(route(2, (xi, w, *args), {})) or xi)(x)
        return seen[0]

    def grad_transform():
        seen = []

        def f(wi):
            seen.append(route(2, (x, wi, *args), {}))
            return wi.sum()
        torch.func.grad(f)(w)
        return seen[0]

    def jit_trace():
        seen = []

        def f(xi):
            seen.append(route(2, (xi, w, *args), {}))
            return xi * 2
        torch.jit.trace(f, (x,), check_trace=False)
        return seen[0]

    return {"plain": (plain, False), "parameter": (parameter, False),
            "subclass": (subclass, True), "integer": (integer, True),
            "zero_size": (zero_size, True), "no_gradient": (no_gradient, True),
            "no_grad": (no_grad, True), "inference_mode": (inference_mode, True),
            "meta": (meta, True), "forward_ad": (forward_ad, True), "vmap": (vmap, True),
            "grad_transform": (grad_transform, True), "jit_trace": (jit_trace, True)}


# Under torch.jit.trace (export_ops off) only the router decides: the
# replacement never reaches the Python path's checks there.
@pytest.mark.parametrize("name,rules", [
    (name, rules) for name in sorted(python_eligibility_cases()) for rules in ("router", "python")
    if (name, rules) != ("jit_trace", "python")])
def test_what_bwdconv_does_not_plan_goes_to_the_original(name, rules):
    # phase serves this strided shape: only a call bwdconv does not plan
    # passes through while it is forced. Both languages' rules decide alike.
    with bwdconv.force_strategy("phase"):
        passes, expected = python_eligibility_cases(rules)[name]
        assert passes() is expected


@pytest.mark.parametrize("bad", [
    dict(args=(None, 0)), dict(args=(None, [2, 2, 2])), dict(kwargs={"stride": 2.0}),
    dict(kwargs={"padding": "full"}), dict(kwargs={"padding": "same", "stride": 2}),
    dict(kwargs={"groups": 3}), dict(kwargs={"strides": 2}), dict(args=(None, 1, 0, 1, 1, 7)),
])
def test_invalid_arguments_raise_pytorchs_own_error(bad):
    x = torch.randn(2, 4, 9, 9, requires_grad=True)
    w = torch.randn(6, 4, 3, 3, requires_grad=True)
    args, kwargs = bad.get("args", ()), bad.get("kwargs", {})

    def error():
        try:
            F.conv2d(x, w, *args, **kwargs)
        except Exception as e:  # noqa: BLE001 - the type and message are compared
            return type(e), str(e)
        return None

    expected = error()
    assert expected is not None
    bwdconv.enable()
    for forced in (None, "phase"):
        with bwdconv.force_strategy(forced):
            assert error() == expected


def test_strict_forcing_that_cannot_serve_still_raises_in_backward():
    x = torch.randn(2, 4, 9, 9, requires_grad=True)
    w = torch.randn(6, 4, 3, 3, requires_grad=True)
    bwdconv.enable()
    with bwdconv.force_strategy("swap1x1", strict=True):  # not a 1x1 filter
        out = F.conv2d(x, w, None, 2)
        with pytest.raises(ValueError, match="swap1x1"):
            out.sum().backward()


@pytest.mark.parametrize("winner", bwdconv.strategies("weight"))
def test_a_key_pending_tuning_takes_the_op_until_decided(fresh_tuning, winner):
    node_after = "ConvolutionBackward0" if winner == "aten" else OP_NODE
    x = torch.randn(2, 4, 9, 9)
    w = torch.randn(6, 4, 3, 3, requires_grad=True)  # the weight gradient alone
    times = {"aten": 2e-3, "splitk": 2e-3, winner: 1e-3}  # the weight gradient's candidates
    _tune._state.timer = lambda gradient, label: times.get(label, 1.0)
    bwdconv.enable(autotune=True)
    out = F.conv2d(x, w, None, 2, 1)
    assert out.grad_fn.name().startswith(OP_NODE)
    out.sum().backward()  # tunes the key
    _tune.set_autotune(False)
    assert F.conv2d(x, w, None, 2, 1).grad_fn.name().startswith(node_after)


GRADIENTS_OF_A_CHANNELS_LAST_OUTPUT = {
    "expanded": lambda out: torch.ones(()).expand(out.shape),  # what out.sum() sends back
    "contiguous": lambda out: torch.ones(out.shape),  # what a flatten or view sends back
    "channels_last": torch.ones_like,
}


@pytest.mark.parametrize("gradient", sorted(GRADIENTS_OF_A_CHANNELS_LAST_OUTPUT))
def test_a_key_tuned_in_backward_is_the_key_the_forward_routes_by(fresh_tuning, gradient):
    # The forward predicts its backward's layout from the operands; the
    # gradient autograd sends back may be laid out otherwise.
    x = torch.randn(2, 4, 9, 9).contiguous(memory_format=torch.channels_last)
    w = torch.randn(6, 4, 3, 3, requires_grad=True)
    _tune._state.timer = lambda gradient, label: 1e-3 if label == "aten" else 2e-3
    bwdconv.enable(autotune=True)
    out = F.conv2d(x, w, None, 2, 1)
    assert out.grad_fn.name().startswith(OP_NODE)  # pending
    out.backward(GRADIENTS_OF_A_CHANNELS_LAST_OUTPUT[gradient](out))  # tunes: aten wins
    (key,) = bwdconv.decisions()
    assert "input channels_last" in key
    assert F.conv2d(x, w, None, 2, 1).grad_fn.name() == "ConvolutionBackward0"


@pytest.mark.parametrize("call_cost, expected", [(0.0, "phase"), (1.5e-3, "aten")])
def test_the_tuner_counts_the_ops_per_call_cost(fresh_tuning, call_cost, expected):
    x = torch.randn(2, 4, 9, 9)
    w = torch.randn(6, 4, 3, 3)
    dy = torch.randn(2, 6, 5, 5)
    _tune._state.timer = lambda gradient, label: {"aten": 2e-3, "phase": 1e-3}.get(label, 1.0)
    _tune._state.call_cost = call_cost
    with bwdconv.autotuning():
        torch.ops.bwdconv.convolution_backward_input(dy, w, list(x.shape), [2, 2], [1, 1],
                                                     [1, 1], 1)
    (entry,) = bwdconv.decisions().values()
    decided = entry["gradients"]["input"]
    assert decided["choice"] == expected, decided
    assert entry["call_cost_us"] == pytest.approx(call_cost * 1e6)
    assert decided["times"]["phase"]["median_us"] == pytest.approx((1e-3 + call_cost) * 1e6)


def test_explain_model_still_sees_every_convolution():
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, stride=2), torch.nn.Conv2d(4, 4, 1))
    plan = bwdconv.explain_model(model, torch.randn(1, 3, 16, 16))
    assert len(plan.layers) == 2


def test_the_python_path_is_taken_under_torch_compile():
    traced = []

    def backend(gm, example_inputs):
        traced.extend(str(n.target) for n in gm.graph.nodes)
        return gm.forward

    bwdconv.enable()
    w = torch.randn(6, 4, 3, 3, requires_grad=True)
    with bwdconv.force_strategy("phase"):
        torch.compile(lambda x: F.conv2d(x, w, None, 2), backend=backend, fullgraph=True)(
            torch.randn(2, 4, 9, 9, requires_grad=True))
    assert any("bwdconv" in t for t in traced), traced


def test_asymmetric_same_padding_planned_for_aten_passes_through():
    """bwdconv pads an asymmetric 'same' call itself; planned for aten, it is
    PyTorch's call all the same (its node, and its batched gradients)."""
    x = torch.randn(1, 1, 1, 11, 12, dtype=torch.double, requires_grad=True)
    w = torch.randn(1, 1, 1, 4, 4, dtype=torch.double, requires_grad=True)
    with bwdconv.enabled():
        assert F.conv3d(x, w, padding="same").grad_fn.name() == "ConvolutionBackward0"
        assert torch.autograd.gradcheck(lambda a, b: F.conv3d(a, b, padding="same"), (x, w),
                                        check_batched_grad=True)
        with bwdconv.force_strategy("phase"):  # a strategy planned: bwdconv's node
            assert F.conv3d(x, w, padding="same").grad_fn.name().startswith(OP_NODE)


# ---- the per-thread plan cache (csrc/ops/plans.h) ----

MEMO_CALL = CALLS[0]


def served_pair(strategy):
    counts = bwdconv.served()
    return counts["input"][strategy], counts["weight"][strategy]


@pytest.mark.parametrize("scope", ["functional", "aten"])
def test_a_memoised_call_is_counted_and_replanned_when_forcing_changes(scope):
    x, w, args, kwargs = operands(MEMO_CALL, bias=False)
    _, _, expected = step(MEMO_CALL, x, w, args, kwargs)
    bwdconv.enable(scope)
    bwdconv.reset_served()
    for _ in range(3):  # the first plans, the others are memoised
        _, _, grads = step(MEMO_CALL, x, w, args, kwargs)
    assert served_pair("aten") == (3, 3)
    with bwdconv.force_strategy("phase"):  # phase serves the input gradient
        _, _, forced = step(MEMO_CALL, x, w, args, kwargs)
    assert served_pair("phase")[0] == 1
    step(MEMO_CALL, x, w, args, kwargs)
    assert served_pair("aten") == (4, 5)  # the weight gradient stayed aten's when forced
    for a, b in zip(grads + forced, expected + expected):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("scope", ["functional", "aten"])
def test_a_memoised_call_is_tuned_once_autotuning_is_switched_on(fresh_tuning, scope):
    x, w, args, kwargs = operands(MEMO_CALL, bias=False)
    # phase wins the input gradient, and with aten's weight gradient, both.
    _tune._state.timer = lambda gradient, label: (
        2e-3 if label == "aten" else 1e-3 if "phase" in label else 1.0)
    _tune._state.call_cost = 0.0
    bwdconv.enable(scope)
    for _ in range(2):
        step(MEMO_CALL, x, w, args, kwargs)  # planned by the rules, then memoised
    assert bwdconv.decisions() == {}
    with bwdconv.autotuning():
        step(MEMO_CALL, x, w, args, kwargs)
    (entry,) = bwdconv.decisions().values()
    assert entry["gradients"]["input"]["choice"] == "phase"
    bwdconv.reset_served()
    step(MEMO_CALL, x, w, args, kwargs)
    assert served_pair("phase")[0] == 1


@pytest.mark.parametrize("scope", ["functional", "aten"])
def test_the_tuners_memoised_routes_stay_apart_from_the_threads_own(fresh_tuning, scope):
    """The tuner plans without measured decisions, so on its thread a call
    the user's plan sends to a strategy can route to aten; memoised in a
    table of its own, that route never serves the user's next call."""
    x, w, args, kwargs = operands(MEMO_CALL, bias=False)
    _tune._state.timer = lambda gradient, label: (
        2e-3 if label == "aten" else 1e-3 if "phase" in label else 1.0)
    _tune._state.call_cost = 0.0
    bwdconv.enable(scope)
    with bwdconv.autotuning():
        step(MEMO_CALL, x, w, args, kwargs)  # decides phase for the input gradient
    C = bwdconv._library._C
    C.mark_thread_as_tuning(True)
    try:
        for _ in range(2):  # the rules' aten, planned, then memoised on the tuner's side
            names, _, _ = step(MEMO_CALL, x, w, args, kwargs)
    finally:
        C.mark_thread_as_tuning(False)
    assert "ConvolutionBackward0" in names
    bwdconv.reset_served()
    step(MEMO_CALL, x, w, args, kwargs)
    assert served_pair("phase")[0] == 1


def test_a_thread_memo_sees_a_change_made_on_another_thread():
    from concurrent.futures import ThreadPoolExecutor

    x, w, args, kwargs = operands(MEMO_CALL, bias=False)
    bwdconv.enable()
    names = []
    with ThreadPoolExecutor(max_workers=1) as worker:  # one thread, one memo
        for forced in (None, None, "phase", None):
            with bwdconv.force_strategy(forced):  # set on this thread
                out = worker.submit(F.conv2d, x, w, *args, **kwargs).result()
            names.append(out.grad_fn.name())
    assert names[:2] == ["ConvolutionBackward0"] * 2
    assert names[2].startswith(OP_NODE)
    assert names[3] == "ConvolutionBackward0"


@pytest.mark.parametrize("scope", ["functional", "aten"])
def test_a_memoised_shape_with_an_invalid_operand_raises_pytorchs_error(scope):
    x, w, args, kwargs = operands(MEMO_CALL)
    bias = args[0]
    variants = {"bias dtype": (x, w, bias.double()), "bias size": (x, w, bias[:-1]),
                "weight dtype": (x, w.double(), bias), "input dtype": (x.double(), w, bias)}

    def errors():
        found = {}
        for name, (xi, wi, bi) in variants.items():
            try:
                F.conv2d(xi, wi, bi, *args[1:]).sum().backward()
                found[name] = None
            except RuntimeError as e:
                found[name] = str(e)
        return found

    expected = errors()
    assert all(expected.values()), expected
    bwdconv.enable(scope)
    for _ in range(2):
        F.conv2d(x, w, bias, *args[1:]).sum().backward()  # memoised
    assert errors() == expected


@pytest.mark.parametrize("scope", ["functional", "aten"])
def test_the_memo_tells_layouts_and_dtypes_apart(scope):
    x, w, args, kwargs = operands(MEMO_CALL, bias=False)
    bwdconv.enable(scope)
    step(MEMO_CALL, x, w, args, kwargs)  # memoised in NCHW float32
    with bwdconv.force_strategy("phase"):  # served by phase where a plan is made
        for variant in (x.detach().contiguous(memory_format=torch.channels_last),
                        x.detach().double()):
            wi = w.detach().to(variant.dtype).requires_grad_()
            bwdconv.reset_served()
            step(MEMO_CALL, variant.requires_grad_(), wi, args, kwargs)
            assert served_pair("phase")[0] == 1


@pytest.mark.parametrize("unbatched", [False, True])
def test_an_operand_whose_size_1_dim_has_another_stride_than_its_layout_gives_passes_through(
        unbatched):
    """An input of one channel, channels_last in memory: aten lays the output
    out by the strides given, bwdconv's op by the strides its layout gives
    (csrc/ops/geometry.h, settled), so the call goes to the original
    function, routed in C++ or (unbatched) in Python, and the output has
    PyTorch's strides."""
    sizes, strides = ((1, 6, 10), (1, 10, 1)) if unbatched else ((3, 1, 6, 10), (60, 1, 10, 1))
    x = torch.randn(180).as_strided(sizes, strides).requires_grad_(True)
    assert _C.settling_restrides(x if not unbatched else x.unsqueeze(0))
    w = torch.randn(4, 1, 3, 3, requires_grad=True)
    expected = F.conv2d(x, w, None, 2)
    bwdconv.enable()
    with bwdconv.force_strategy("phase"):
        out = F.conv2d(x, w, None, 2)
    assert out.stride() == expected.stride()
    assert not any(n.startswith(OP_NODE) for n in node_names(out))
    torch.testing.assert_close(out, expected)
