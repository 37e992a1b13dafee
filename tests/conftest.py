import atexit
import os
import shutil
import tempfile

import pytest
import torch


def own_empty_cache_directory():
    """An empty decisions cache for this process, removed when it exits (by
    the process that made it, not by a child forked from it)."""
    path = tempfile.mkdtemp(prefix="bwdconv-test-cache-")
    maker = os.getpid()
    atexit.register(lambda: os.getpid() == maker and shutil.rmtree(path, ignore_errors=True))
    return path


# Measured decisions from the user's own cache would replace the rules the
# tests check: the suite gets an empty cache directory of its own.
os.environ["BWDCONV_CACHE_DIR"] = own_empty_cache_directory()
# Tuning (the benchmark's tuned column) spends at most this long per shape.
os.environ.setdefault("BWDCONV_AUTOTUNE_KEY_SECONDS", "0.05")

import bwdconv  # noqa: E402


@pytest.fixture(autouse=True)
def restore_bwdconv_state():
    """Every test starts and ends with bwdconv disabled and no strategy forced."""
    bwdconv.disable()
    yield
    bwdconv.disable()
    bwdconv._explain._C.set_forcing(None, None)


@pytest.fixture
def fresh_tuning(tmp_path, monkeypatch):
    """An empty decisions cache of the test's own, no decisions in memory,
    short tuning, the default memory budget; afterwards autotuning off, real
    timing, peaks and call costs, nothing corrupted, no decisions."""
    from bwdconv import _cache, _tune

    monkeypatch.setenv("BWDCONV_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(_tune, "KEY_SECONDS", 0.05)
    monkeypatch.setattr(_tune._state, "cache", _cache.DecisionCache())
    monkeypatch.setattr(_tune._state, "memory_budget", ("gradient", None))
    bwdconv._library._C.forget_decisions()
    yield
    _tune.set_autotune(False)
    _tune._state.timer = None
    _tune._state.peak = None
    _tune._state.call_cost = None
    bwdconv._library._C._testing.set_faults(corrupted=None)
    bwdconv._library._C.forget_decisions()


def free_port():
    """A TCP port free on the loopback interface (for a process group)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def aten_gradients(grad_output, input, weight, stride, padding, dilation, groups):
    """Reference input and weight gradients from aten.convolution_backward."""
    grad_input, grad_weight, _ = torch.ops.aten.convolution_backward(
        grad_output, input, weight, None, stride, padding, dilation, False,
        [0] * len(stride), groups, [True, True, False],
    )
    return grad_input, grad_weight


def module_gradients(module, x):
    """Gradients of x and of every parameter after one backward of a sum of squares."""
    module.zero_grad(set_to_none=True)
    x = x.detach().requires_grad_(True)
    module(x).square().sum().backward()
    return [x.grad] + [p.grad for p in module.parameters()]
