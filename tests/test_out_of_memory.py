"""A strategy that runs out of memory: its gradient comes from aten, with one
warning, and its shape avoids it from then on; aten's own out-of-memory error
reaches the user. Out-of-memory errors are injected (fault injection)."""

import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import bwdconv
from bwdconv._library import _C
from conftest import module_gradients


@pytest.fixture(autouse=True)
def out_of_memory_for():
    """out_of_memory_for(*strategies): injects an out-of-memory error into
    every computation by those strategies; undone, and forgotten, after the test."""
    yield lambda *strategies: _C._testing.set_faults(out_of_memory=list(strategies))
    _C._testing.set_faults()
    _C._testing.forget_out_of_memory()


def strided_net():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.ReLU(),
                         nn.Conv2d(8, 8, 3, stride=2, padding=1), nn.ReLU(),
                         nn.ConvTranspose2d(8, 4, 2, stride=2)).double()


@pytest.fixture
def caught_warnings(capfd):
    """caught_warnings(fn) -> (fn(), the out-of-memory warnings it gave):
    Python warnings, or c10's on stderr where the op's caller (the autograd
    engine, torch.ops) has no Python warning handler."""
    def run(fn):
        capfd.readouterr()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = fn()
        messages = [str(w.message) for w in caught] + capfd.readouterr().err.splitlines()
        return result, [m for m in messages if "ran out of memory" in m]
    return run


@pytest.mark.parametrize("scope", ["functional", "aten"])
@pytest.mark.parametrize("strategy", [s for s in bwdconv.strategies() if s != "aten"])
def test_a_training_step_survives_and_gives_atens_gradients(caught_warnings, out_of_memory_for,
                                                            scope, strategy):
    model, x = strided_net(), torch.randn(2, 3, 12, 12, dtype=torch.double)
    expected = module_gradients(model, x)
    out_of_memory_for(strategy)
    with bwdconv.enabled(scope), bwdconv.force_strategy(strategy):
        bwdconv.reset_served()
        first, told = caught_warnings(lambda: module_gradients(model, x))
        assert told and all(strategy in m for m in told), told
        gradient = "weight" if strategy in bwdconv.strategies("weight") else "input"
        assert bwdconv.served()[gradient][strategy] == 0
        second, told_again = caught_warnings(lambda: module_gradients(model, x))
    assert not told_again, "the shape kept its strategy after it ran out of memory"
    for got in (first, second):
        for a, e in zip(got, expected, strict=True):
            torch.testing.assert_close(a, e, rtol=1e-10, atol=1e-10)


def test_the_warning_names_the_strategy_and_the_shape(caught_warnings, out_of_memory_for):
    x = torch.randn(2, 4, 9, 9, dtype=torch.double, requires_grad=True)
    w = torch.randn(6, 4, 3, 3, dtype=torch.double, requires_grad=True)
    out_of_memory_for("phase")
    with bwdconv.enabled(), bwdconv.force_strategy("phase"):
        _, told = caught_warnings(lambda: F.conv2d(x, w, None, 2).sum().backward())
    assert len(told) == 1
    assert "phase ran out of memory computing the input gradient of conv2d input [2, 4, 9, 9]" \
        in told[0] and "filter [3, 3] stride [2, 2] (float64" in told[0]


def test_the_plan_explains_the_avoided_strategy(caught_warnings, out_of_memory_for):
    x = torch.randn(2, 4, 9, 9, dtype=torch.double, requires_grad=True)
    w = torch.randn(6, 4, 3, 3, dtype=torch.double)
    out_of_memory_for("phase_stacked")
    with bwdconv.enabled(), bwdconv.force_strategy("phase_stacked"):
        caught_warnings(lambda: F.conv2d(x, w, None, 2).sum().backward())
        plan = bwdconv.explain(x, w, 2)
    assert plan.input_strategy == "aten"
    assert "phase_stacked ran out of memory on this shape" in str(plan)
    other = bwdconv.explain([2, 4, 11, 11], [6, 4, 3, 3], 2, dtype=torch.double)
    assert "ran out of memory" not in str(other)  # other shapes keep their plans


def test_atens_own_out_of_memory_error_reaches_the_user(caught_warnings, out_of_memory_for):
    x = torch.randn(2, 4, 9, 9, requires_grad=True)
    w = torch.randn(6, 4, 3, 3, requires_grad=True)
    out_of_memory_for("phase", "aten")  # aten, standing in for phase, runs out too
    with bwdconv.enabled(), bwdconv.force_strategy("phase"), \
            pytest.raises(torch.OutOfMemoryError, match="injected for aten"):
        F.conv2d(x, w, None, 2).sum().backward()


def test_a_transposed_forward_survives_in_inference(caught_warnings, out_of_memory_for):
    module = nn.ConvTranspose2d(8, 4, 2, stride=2).double().eval()
    x = torch.randn(1, 8, 5, 5, dtype=torch.double)
    expected = module(x)
    out_of_memory_for("swap1x1")
    with bwdconv.enabled(), bwdconv.force_strategy("swap1x1"), torch.inference_mode():
        got, told = caught_warnings(lambda: module(x))
    assert len(told) == 1 and "conv_transpose2d" in told[0]
    torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-12)


def test_under_torch_compile(caught_warnings, out_of_memory_for):
    model, x = strided_net(), torch.randn(2, 3, 12, 12, dtype=torch.double)
    expected = module_gradients(model, x)
    out_of_memory_for("phase")
    torch._dynamo.reset()
    with bwdconv.enabled(), bwdconv.force_strategy("phase"):
        compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
        got, told = caught_warnings(lambda: module_gradients(compiled, x))
    assert told
    for a, e in zip(got, expected, strict=True):
        torch.testing.assert_close(a, e, rtol=1e-10, atol=1e-10)
