"""enable()/disable(): routing nn.Conv*d and F.conv*d through bwdconv and back."""

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import bwdconv
from conftest import module_gradients


def test_issue_example_matches_disabled():
    m = nn.Conv2d(4, 8, 3, stride=2).double()
    x = torch.randn(2, 4, 9, 9, dtype=torch.double)
    expected = module_gradients(m, x)
    bwdconv.enable()
    ours = module_gradients(m, x)
    for a, b in zip(ours, expected):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_disable_restores_exactly_the_original_functions():
    originals = (F.conv1d, F.conv2d, F.conv3d)
    bwdconv.enable()
    assert F.conv2d is bwdconv.conv2d
    assert bwdconv.is_enabled() and bwdconv.is_enabled("functional")
    bwdconv.enable()  # twice: still restorable
    bwdconv.disable()
    assert (F.conv1d, F.conv2d, F.conv3d) == originals
    assert not bwdconv.is_enabled()


def test_context_manager_restores_previous_state():
    with bwdconv.enabled():
        assert bwdconv.is_enabled("functional")
    assert not bwdconv.is_enabled("functional")
    bwdconv.enable()
    with bwdconv.enabled():
        pass
    assert bwdconv.is_enabled("functional")


def test_unknown_scope_is_rejected():
    with pytest.raises(ValueError, match="unknown scope 'everything'"):
        bwdconv.enable("everything")


def test_enabled_modules_call_the_bwdconv_op_where_a_strategy_is_planned():
    m = nn.Conv2d(2, 2, 3, stride=2)
    x = torch.randn(1, 2, 5, 5, requires_grad=True)
    bwdconv.enable()
    with bwdconv.force_strategy("phase"):
        assert m(x).grad_fn.name().startswith("torch::autograd::CppNode<bwdconv::ops::")
    assert m(x).grad_fn.name() == "ConvolutionBackward0"  # the rules plan aten here
    bwdconv.disable()
    assert m(x).grad_fn.name() == "ConvolutionBackward0"


MODULES = [
    lambda mode: nn.Conv1d(3, 6, 4, stride=3, padding=2, dilation=2, padding_mode=mode),
    lambda mode: nn.Conv2d(4, 8, 3, stride=2, padding=1, groups=2, padding_mode=mode),
    lambda mode: nn.Conv2d(4, 8, (1, 3), stride=(2, 1), padding=(0, 1), padding_mode=mode),
    lambda mode: nn.Conv2d(4, 4, 3, padding="same", dilation=2, padding_mode=mode),
    lambda mode: nn.Conv2d(4, 4, 4, padding="same", padding_mode=mode),  # asymmetric
    lambda mode: nn.Conv2d(4, 4, 3, padding="valid", padding_mode=mode),
    lambda mode: nn.Conv3d(2, 4, 3, stride=(1, 2, 2), padding=1, padding_mode=mode),
    lambda mode: nn.Conv3d(2, 2, (2, 3, 1), stride=2, bias=False, padding_mode=mode),
]
PADDING_MODES = ["zeros", "reflect", "replicate", "circular"]


@pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel")
@pytest.mark.parametrize("make", MODULES)
@pytest.mark.parametrize("padding_mode", PADDING_MODES)
def test_round_trip_on_modules(make, padding_mode):
    torch.manual_seed(0)
    m = make(padding_mode).double()
    dims = m.weight.dim() - 2
    x = torch.randn(2, m.in_channels, *[9] * dims, dtype=torch.double)
    expected = module_gradients(m, x)
    with bwdconv.enabled():
        ours = module_gradients(m, x)
    after = module_gradients(m, x)
    for a, b, c in zip(ours, expected, after):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)
        torch.testing.assert_close(c, b, rtol=0, atol=0)


@pytest.mark.parametrize("dims", [1, 2, 3])
def test_unbatched_input(dims):
    w = torch.randn(4, 3, *[3] * dims, dtype=torch.double)
    x = torch.randn(3, *[6] * dims, dtype=torch.double)
    ours = getattr(bwdconv, f"conv{dims}d")(x, w, None, 2, 1)
    theirs = getattr(F, f"conv{dims}d")(x, w, None, 2, 1)
    torch.testing.assert_close(ours, theirs)


def test_functional_string_padding_matches_torch():
    x = torch.randn(1, 2, 8, 7, dtype=torch.double)
    w = torch.randn(3, 2, 4, 3, dtype=torch.double)
    for padding in ("same", "valid"):
        torch.testing.assert_close(bwdconv.conv2d(x, w, padding=padding, dilation=(1, 2)),
                                   F.conv2d(x, w, padding=padding, dilation=(1, 2)))


def test_channels_last_module_gradients_keep_pytorch_layout():
    m = nn.Conv2d(4, 8, 3, stride=2, padding=1).to(memory_format=torch.channels_last)
    x = torch.randn(2, 4, 10, 10).to(memory_format=torch.channels_last)
    expected = module_gradients(m, x)
    with bwdconv.enabled():
        ours = module_gradients(m, x)
    for a, b in zip(ours, expected):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
        assert a.stride() == b.stride()


def test_autocast_casts_the_op_itself():
    x, w = torch.randn(1, 2, 6, 6), torch.randn(3, 2, 3, 3)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = torch.ops.bwdconv.convolution(x, w, None, [2, 2], [1, 1], [1, 1], 1)
    assert y.dtype == torch.bfloat16
    assert torch.ops.bwdconv.convolution(x.double(), w.double(), None, [1, 1], [0, 0], [1, 1],
                                         1).dtype == torch.float64


def test_autocast_bfloat16_on_cpu():
    m = nn.Conv2d(3, 4, 3, stride=2)
    x = torch.randn(2, 3, 8, 8)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        expected = m(x)
        with bwdconv.enabled():
            ours = m(x)
    assert ours.dtype == expected.dtype == torch.bfloat16
    torch.testing.assert_close(ours, expected)
    # The backward leaves float32 parameter gradients, as with aten.
    grads = []
    for use_bwdconv in (False, True):
        m.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16), bwdconv.enabled() if use_bwdconv \
                else torch.autocast("cpu", dtype=torch.bfloat16):
            loss = m(x).float().square().sum()
        loss.backward()
        grads.append([p.grad.clone() for p in m.parameters()])
    for ours_grad, aten_grad in zip(grads[1], grads[0]):
        assert ours_grad.dtype == torch.float32
        torch.testing.assert_close(ours_grad, aten_grad, rtol=2e-2, atol=2e-2)


def test_deepcopy_of_enabled_model_still_trains():
    m = nn.Sequential(nn.Conv2d(1, 2, 3, stride=2), nn.ReLU(), nn.Conv2d(2, 1, 1))
    with bwdconv.enabled():
        clone = copy.deepcopy(m)
        clone(torch.randn(1, 1, 7, 7)).sum().backward()
    assert all(p.grad is not None for p in clone.parameters())
