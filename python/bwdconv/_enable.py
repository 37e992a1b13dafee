"""Routing PyTorch's convolutions through bwdconv, and back.

Two scopes:
- "functional": torch.nn.functional.conv1d/conv2d/conv3d (and so every
  nn.Conv1d/2d/3d, padding modes included) call bwdconv's ops, whose autograd
  plans the backward; calls bwdconv does not plan go to the functions replaced
  (see bwdconv.functional).
- "aten": bwdconv's kernel is registered for aten::convolution_backward at the
  CPU and CUDA dispatch keys, so every convolution backward in the process is
  planned, including the extern call torch.compile/inductor emits for it.
"""

import contextlib
import threading

import torch

from . import _tune, functional
from ._library import _C

__all__ = ["enable", "disable", "is_enabled", "enabled"]

SCOPES = ("functional", "aten")

_lock = threading.Lock()
_originals = {}  # name -> the torch.nn.functional function bwdconv replaced
_REPLACEMENTS = {1: functional.conv1d, 2: functional.conv2d, 3: functional.conv3d}


def _check_scope(scope):
    if scope not in SCOPES:
        raise ValueError(f"unknown scope {scope!r}; expected one of {', '.join(SCOPES)}")


def _scopes(scope):
    if scope is None:
        return SCOPES
    _check_scope(scope)
    return (scope,)


def enable(scope="functional", autotune=None, *, export_ops=False):
    """Plans convolution backward with bwdconv in `scope` ("functional" or "aten").
    `autotune=True` also switches autotuning on for the process (False: off;
    None: unchanged; see bwdconv.autotuning).

    In the functional scope, torch.export and torch.jit.trace record aten's
    convolutions, so that their artifacts load without bwdconv;
    `export_ops=True` records bwdconv's ops instead.
    """
    _check_scope(scope)
    if autotune is not None:
        _tune.set_autotune(autotune)
    with _lock:
        if scope == "aten":
            _C.enable_aten_scope()
            return
        functional.export_ops = export_ops
        if not _originals:
            for dims, replacement in _REPLACEMENTS.items():
                name = f"conv{dims}d"
                _originals[name] = functional.originals[dims] = getattr(torch.nn.functional, name)
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
