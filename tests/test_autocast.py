"""Under torch.autocast a convolution computes in the autocast dtype, so
bwdconv plans, tunes and keys it in that dtype: in both scopes, in float16 and
bfloat16, with autotuning on and off, and through torch.compile. The plan of a
call under autocast must be the plan of the same call made in the autocast
dtype without autocast; the results must be aten's under autocast."""

import copy

import pytest
import torch
from torch import nn

import bwdconv

SCOPES = ["functional", "aten"]
DTYPES = [torch.bfloat16, torch.float16]


def devices():
    return ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def two_layers(seed=0):
    """A 3x3 conv then a strided 1x1 one, the shape of a ResNet's downsample."""
    torch.manual_seed(seed)
    return nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.Conv2d(32, 64, 1, stride=2))


def served_by_step(model, x, autocast_dtype=None):
    """served() after one forward and backward of `model` on `x`, and the
    step's output and parameter gradients."""
    bwdconv.reset_served()
    with torch.autocast(x.device.type, dtype=autocast_dtype or torch.float32,
                        enabled=autocast_dtype is not None):
        y = model(x)
    y.float().square().sum().backward()
    return bwdconv.served(), y, [p.grad for p in model.parameters()]


def strategies_used(served):
    return {g: {s: n for s, n in counts.items() if n} for g, counts in served.items()}


def gpu_marks(device):
    return [pytest.mark.gpu] if device == "cuda" else []


@pytest.mark.parametrize("device", [pytest.param(d, marks=gpu_marks(d)) for d in devices()])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("scope", SCOPES)
def test_a_call_under_autocast_is_planned_as_in_the_autocast_dtype(scope, dtype, device):
    model = two_layers().to(device)
    x = torch.randn(4, 3, 24, 24, device=device)
    with bwdconv.enabled(scope):
        under_autocast, y, grads = served_by_step(copy.deepcopy(model), x, dtype)
        in_dtype, _, _ = served_by_step(copy.deepcopy(model).to(dtype), x.to(dtype))
    assert strategies_used(under_autocast) == strategies_used(in_dtype)
    # The results are aten's under autocast.
    reference_y, reference_grads = served_by_step(copy.deepcopy(model), x, dtype)[1:]
    assert y.dtype == reference_y.dtype == dtype
    torch.testing.assert_close(y, reference_y, rtol=2e-2, atol=2e-2)
    for g, r in zip(grads, reference_grads):
        assert g.dtype == r.dtype == torch.float32
        scale = r.abs().max().item()
        torch.testing.assert_close(g, r, rtol=3e-2, atol=3e-2 * scale)


@pytest.mark.parametrize("scope", SCOPES)
def test_the_strided_1x1_under_bfloat16_autocast_is_served_by_swap1x1(scope):
    """On the CPU the rules plan swap1x1 for a bfloat16 strided 1x1 input
    gradient of this size (explain says so); autocast must not hide it."""
    model = two_layers()
    x = torch.randn(8, 3, 56, 56)
    x16, w16 = torch.randn(8, 32, 56, 56, dtype=torch.bfloat16), \
        torch.randn(64, 32, 1, 1, dtype=torch.bfloat16)
    assert bwdconv.explain(x16, w16, stride=2).input_strategy == "swap1x1"
    with bwdconv.enabled(scope):
        served, _, _ = served_by_step(model, x, torch.bfloat16)
    assert served["input"]["swap1x1"] == 1
    assert sum(served["weight"].values()) == 2


@pytest.mark.parametrize("scope", SCOPES)
def test_autotuning_under_autocast_measures_and_keys_the_autocast_dtype(scope, fresh_tuning):
    model = two_layers()
    x = torch.randn(2, 3, 16, 16)
    with bwdconv.enabled(scope), bwdconv.autotuning():
        served_by_step(model, x, torch.bfloat16)
    keys = list(bwdconv.decisions())
    assert keys, "autotuning measured nothing"
    assert all(" | bfloat16 | " in key for key in keys), keys


@pytest.mark.parametrize("scope", SCOPES)
def test_a_compiled_model_under_autocast_plans_as_eager(scope):
    model = two_layers()
    x = torch.randn(4, 3, 24, 24)
    with bwdconv.enabled(scope):
        eager, y_eager, _ = served_by_step(copy.deepcopy(model), x, torch.bfloat16)
        torch._dynamo.reset()
        compiled = torch.compile(copy.deepcopy(model), backend="aot_eager")
        served, y_compiled, _ = served_by_step(compiled, x, torch.bfloat16)
    torch._dynamo.reset()
    assert strategies_used(served) == strategies_used(eager)
    assert y_compiled.dtype == torch.bfloat16
    torch.testing.assert_close(y_compiled, y_eager, rtol=2e-2, atol=2e-2)


def test_explain_model_under_autocast_plans_what_training_serves_and_counts_nothing():
    model = two_layers()
    x = torch.randn(8, 3, 56, 56)
    bwdconv.reset_served()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        explained = bwdconv.explain_model(model, x).counts()
    assert bwdconv.served() == {g: {s: 0 for s in bwdconv.strategies()}
                                for g in ("input", "weight", "forward")}
    with bwdconv.enabled():
        served, _, _ = served_by_step(model, x, torch.bfloat16)
    assert explained == strategies_used(served)
