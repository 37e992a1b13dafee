"""While nothing is tuned, a call whose sizes no cached decision has gets the
rules from the C++ lookup without a call into Python (csrc/ops/plans.h,
HookShortcut): a process whose shapes keep changing pays no Python per new
shape. What a cached decision says still applies, from a cache found at a
new location too (read for the calls planned after the switch), and
switching autotuning on asks the hook again."""

import pytest
import torch

import bwdconv
from bwdconv import _tune
from bwdconv._library import _C
from conftest import aten_gradients
from test_tune import STRIDED, input_gradient, operands, timer


@pytest.fixture(autouse=True)
def fresh_decisions(fresh_tuning, monkeypatch):
    monkeypatch.setattr(_tune, "KEY_SECONDS", 0.2)


@pytest.fixture
def asked():
    """The sizes of every call the tuning hook is asked about."""
    calls = []

    def counting_hook(request):
        calls.append((request["input_size"], request["weight_size"]))
        return _tune._hook(request)
    _C.set_tuning_hook(counting_hook)
    yield calls
    _C.set_tuning_hook(_tune._hook)


def taller(case, rows):
    """`case` with an input `rows` rows taller: a shape of its own."""
    n, c, h, w = case[0]
    return ((n, c, h + rows, w),) + case[1:]


def tune_with_phase_fastest(case):
    x, w, dy = operands(case)
    _tune._state.timer = timer({"aten": 2e-3, "phase": 1e-3})
    with bwdconv.autotuning():
        input_gradient(case, x, w, dy)
    _tune._state.timer = None


def measured_input_gradients(case):
    """How many of one call's input gradients a measured decision chose."""
    bwdconv.reset_served()
    input_gradient(case, *operands(case))
    return sum(bwdconv.served(measured=True)["input"].values())


def test_new_shapes_get_the_rules_without_asking_python(asked):
    tune_with_phase_fastest(STRIDED)
    _C.forget_decisions()  # the cache file keeps the decision
    asked.clear()
    assert measured_input_gradients(STRIDED) == 1
    assert len(asked) == 1  # the hook answered from the cache
    bwdconv.reset_served()
    for rows in range(1, 21):
        case = taller(STRIDED, rows)
        x, w, dy = operands(case)
        result = input_gradient(case, x, w, dy)
        torch.testing.assert_close(result, aten_gradients(dy, x, w, *case[2:])[0])
    assert sum(bwdconv.served()["input"].values()) == 20
    assert sum(bwdconv.served(measured=True)["input"].values()) == 0
    assert len(asked) == 2  # the first new shape: the rules, and the shortcut published
    assert measured_input_gradients(STRIDED) == 1  # the table still has the decision


def test_a_call_with_cached_sizes_asks_the_hook(asked):
    tune_with_phase_fastest(STRIDED)
    _C.forget_decisions()
    asked.clear()
    input_gradient(taller(STRIDED, 1), *operands(taller(STRIDED, 1)))  # publishes
    assert len(asked) == 1 and _C.has_hook_shortcut()
    # The weight gradient's key is not cached, its sizes are: the hook decides.
    x, w, dy = operands(STRIDED)
    s, p, d, groups = STRIDED[2:]
    torch.ops.bwdconv.convolution_backward_weight(dy, x, list(w.shape), s, p, d, groups)
    assert asked[-1] == (list(x.shape), list(w.shape)) and len(asked) == 2
    assert sum(bwdconv.served(measured=True)["weight"].values()) == 0


def test_a_cache_at_a_new_location_is_read(asked, tmp_path, monkeypatch):
    elsewhere = taller(STRIDED, 3)
    monkeypatch.setenv("BWDCONV_CACHE_DIR", str(tmp_path / "elsewhere"))
    tune_with_phase_fastest(elsewhere)
    monkeypatch.setenv("BWDCONV_CACHE_DIR", str(tmp_path / "empty"))
    _C.forget_decisions()
    asked.clear()
    assert measured_input_gradients(STRIDED) == 0  # publishes: nothing cached here
    assert measured_input_gradients(taller(STRIDED, 4)) == 0
    assert len(asked) == 1
    monkeypatch.setenv("BWDCONV_CACHE_DIR", str(tmp_path / "elsewhere"))
    assert measured_input_gradients(elsewhere) == 1
    assert len(asked) == 2


def test_autotuning_switched_on_asks_again(asked):
    input_gradient(STRIDED, *operands(STRIDED))
    assert _C.has_hook_shortcut() and len(asked) == 1
    fresh = taller(STRIDED, 2)
    _tune._state.timer = timer({"aten": 2e-3, "phase": 1e-3})
    with bwdconv.autotuning():
        assert not _C.has_hook_shortcut()
        assert measured_input_gradients(fresh) == 1
    assert asked[-1][0] == list(fresh[0]) and len(bwdconv.decisions()) == 1


def test_the_budget_spent_publishes_the_shortcut(asked, monkeypatch):
    monkeypatch.setattr(_tune._state, "spent", _tune.BUDGET_SECONDS)
    with bwdconv.autotuning():
        input_gradient(STRIDED, *operands(STRIDED))
        assert _C.has_hook_shortcut()
        input_gradient(taller(STRIDED, 1), *operands(taller(STRIDED, 1)))
    assert len(asked) == 1 and bwdconv.decisions() == {}
