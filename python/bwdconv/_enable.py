"""Routing PyTorch's convolutions through bwdconv, and back.

Two scopes:
- "functional": torch.nn.functional.conv1d/conv2d/conv3d and
  conv_transpose1d/2d/3d (and so every nn.Conv*d and nn.ConvTranspose*d,
  padding modes included) are planned by bwdconv: a call planned for aten
  goes to the function replaced, so PyTorch's own autograd node serves it;
  a call with a strategy planned calls bwdconv's ops (see bwdconv.functional).
- "aten": bwdconv's kernel is registered for aten::convolution_backward at the
  CPU and CUDA dispatch keys, so every convolution backward in the process is
  planned, including the extern call torch.compile/inductor emits for it.
"""

import contextlib
import threading

import torch

from . import _settings, _tune, functional
from ._library import _C

__all__ = ["enable", "disable", "is_enabled", "enabled"]

SCOPES = ("functional", "aten")

_lock = threading.Lock()
_originals = {}  # name -> the torch.nn.functional function bwdconv replaced
# name -> (bwdconv's replacement, the table of originals it calls, spatial dims)
_REPLACEMENTS = {
    f"{prefix}{dims}d": (getattr(functional, f"{prefix}{dims}d"), table, dims)
    for prefix, table in (("conv", functional.originals),
                          ("conv_transpose", functional.transposed_originals))
    for dims in (1, 2, 3)
}


def _check_scope(scope):
    if scope not in SCOPES:
        raise ValueError(f"unknown scope {scope!r}; expected one of {', '.join(SCOPES)}")


def _scopes(scope):
    if scope is None:
        return SCOPES
    _check_scope(scope)
    return (scope,)


def enable(scope="functional", autotune=None, *, export_ops=False, memory_budget=None):
    """Plans convolution backward with bwdconv in `scope` ("functional" or "aten").
    `autotune=True` also switches autotuning on for the process (False: off;
    None: unchanged; see bwdconv.autotuning).

    `memory_budget` sets how much more memory than aten a tuned choice may
    take, for the process: "gradient" (the default, the bytes of the gradient
    it writes), a byte count, or a factor of aten's peak such as "1.5x"
    (None: unchanged; docs/tuning.md).

    In the functional scope, torch.export and torch.jit.trace record aten's
    convolutions, so that their artifacts load without bwdconv;
    `export_ops=True` records bwdconv's ops instead.
    """
    _check_scope(scope)
    _settings.bool_argument("enable", "autotune", autotune, optional=True)
    _settings.bool_argument("enable", "export_ops", export_ops)
    if memory_budget is not None:
        _tune.set_memory_budget(memory_budget)
    if autotune is not None:
        _tune.set_autotune(autotune)
    with _lock:
        if scope == "aten":
            _C.enable_aten_scope()
            return
        functional.export_ops = export_ops
        if not _originals:
            for name, (replacement, table, dims) in _REPLACEMENTS.items():
                _originals[name] = table[dims] = getattr(torch.nn.functional, name)
                setattr(torch.nn.functional, name, replacement)


def disable(scope=None):
    """Restores exactly what `enable` replaced, in `scope` (default: every scope)."""
    with _lock:
        for s in _scopes(scope):
            if s == "aten":
                _C.disable_aten_scope()
            else:
                for name, original in _originals.items():
                    setattr(torch.nn.functional, name, original)
                _originals.clear()
                functional.export_ops = False


def is_enabled(scope=None):
    """Whether bwdconv is enabled in `scope` (default: in any scope)."""
    states = {"functional": bool(_originals), "aten": _C.aten_scope_enabled()}
    return any(states[s] for s in _scopes(scope))


@contextlib.contextmanager
def enabled(scope="functional"):
    """Enables bwdconv in `scope` for the body of a `with` block, then restores
    the previous state of that scope."""
    was_enabled = is_enabled(scope)
    enable(scope)
    try:
        yield
    finally:
        if not was_enabled:
            disable(scope)
