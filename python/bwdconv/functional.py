"""bwdconv.conv*d and conv_transpose*d: torch.nn.functional's signatures, bwdconv's
plans; and enable()/disable(), which route PyTorch's convolutions through bwdconv.

Two scopes:
- "functional": torch.nn.functional.conv1d/conv2d/conv3d and
  conv_transpose1d/2d/3d (and so every nn.Conv*d and nn.ConvTranspose*d,
  padding modes included) are replaced by this module's functions.
- "aten": bwdconv's kernel is registered for aten::convolution_backward at the
  CPU and CUDA dispatch keys, so every convolution backward in the process is
  planned, including the extern call torch.compile/inductor emits for it.

A call bwdconv does not plan goes to the original function (torch.nn.functional's
conv1d/2d/3d as enable() found them), so that PyTorch computes it, or raises its
own exception, exactly as without bwdconv. bwdconv plans calls whose input and
weight are plain tensors (or parameters) of a planned dtype on the CPU or a GPU,
with no zero-size input or weight, that need a gradient (a transposed
convolution's forward is planned with or without one), and that run outside
torch.func transforms, forward-mode AD, torch.jit tracing and torch.export
(unless export_ops is on). Invalid arguments raise PyTorch's own error: when
bwdconv's op refuses a call, the original function is called to raise it.
"""

import contextlib
import inspect
import threading
import typing

import torch
import torch.autograd.forward_ad as _forward_ad
from torch._subclasses.fake_tensor import FakeTensor

from . import _settings, _tune
from ._library import _C
from ._args import check_input_rank, expand, transposed_spatial_output

__all__ = ["conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
           "conv_transpose3d"]

_pad = torch.nn.functional.pad

# spatial dims -> the function a call bwdconv does not plan goes to: the one
# enable() replaced, torch.nn.functional's own until then.
originals = {1: torch.nn.functional.conv1d, 2: torch.nn.functional.conv2d,
             3: torch.nn.functional.conv3d}
transposed_originals = {1: torch.nn.functional.conv_transpose1d,
                        2: torch.nn.functional.conv_transpose2d,
                        3: torch.nn.functional.conv_transpose3d}

# When True, torch.export and torch.jit.trace record bwdconv's ops (see enable).
export_ops = False

# Callables told about every convolution bwdconv plans, with its final
# operands and arguments (see bwdconv.explain_model).
_observers = []

_PLANNED_DTYPES = frozenset((torch.float64, torch.float32, torch.float16, torch.bfloat16))
_PLAIN_TENSOR_TYPES = (torch.Tensor, torch.nn.Parameter)


def _plain(tensor):
    if type(tensor) in _PLAIN_TENSOR_TYPES:
        return True
    # torch.export traces with fake tensors; they stand for plain ones there.
    return export_ops and torch.compiler._is_exporting_flag and type(tensor) is FakeTensor


def _needs_gradient(input, weight, bias):
    if not torch.is_grad_enabled():
        return False
    return input.requires_grad or weight.requires_grad or (
        bias is not None and bias.requires_grad)


def _tracing_for_an_artifact():
    """torch.export or torch.jit.trace is recording the call (torch.compile is
    not). The flag behind torch.compiler.is_exporting() is read directly:
    dynamo folds the function itself to True whenever it traces."""
    return torch.compiler._is_exporting_flag or torch.jit.is_tracing()


def _inside_functorch_transform():
    # type(...) rather than `is None`: dynamo wraps the result in an object
    # whose identity with None it does not fold.
    return type(torch._C._functorch.peek_interpreter_stack()) is not type(None)


def _plans(input, weight, bias, gradient_needed=True):
    """Cheap checks that the call is one bwdconv plans; anything else, invalid
    calls included, goes to the original function."""
    if not (_plain(input) and _plain(weight) and (bias is None or _plain(bias))):
        return False  # None, numbers, tensor subclasses (fake, functional, DTensor...)
    if input.dtype not in _PLANNED_DTYPES or not (input.is_cpu or input.is_cuda):
        return False
    if input.numel() == 0 or weight.numel() == 0:
        return False
    if gradient_needed and not _needs_gradient(input, weight, bias):
        return False
    if _inside_functorch_transform():
        return False  # torch.func's transforms apply PyTorch's own rules
    if _forward_ad._current_level >= 0:
        return False  # a dual level is open: inputs may carry tangents
    return export_ops or not _tracing_for_an_artifact()


# Whether aten's own warning about asymmetric 'same' padding has been asked for.
_same_padding_warning_given = False


def _warn_as_aten_for_asymmetric_same_padding(input, weight, stride, dilation, groups,
                                              spatial_dims):
    """aten warns once per process (TORCH_WARN_ONCE) when 'same' padding needs
    a padded copy of the input; the original function raises that warning
    here, on meta tensors, the first time bwdconv pads such a call itself."""
    global _same_padding_warning_given
    if _same_padding_warning_given or torch.compiler.is_compiling():
        return
    _same_padding_warning_given = True
    meta = dict(dtype=input.dtype, device="meta")
    originals[spatial_dims](torch.empty(input.shape, **meta), torch.empty(weight.shape, **meta),
                            None, stride, "same", dilation, groups)


def _same_padding(input, weight, stride, dilation, groups, spatial_dims):
    """'same' padding as aten applies it: the left half on both sides of the
    convolution, and the odd remainder as an explicit pad on the right."""
    if any(s != 1 for s in stride):
        raise ValueError("padding='same' is not supported for strided convolutions")
    total = [dilation[i] * (weight.shape[i + 2] - 1) for i in range(spatial_dims)]
    left = [t // 2 for t in total]
    extra = [t - 2 * l for t, l in zip(total, left)]
    if any(extra):
        pad_last_dim_first = []
        for e in reversed(extra):
            pad_last_dim_first += [0, e]
        input = _pad(input, pad_last_dim_first)
    return input, left, any(extra)


# What _planned_convolution returns for a call whose plan is aten's alone:
# the caller hands the arguments as given to the original function.
PASS_THROUGH = object()


def _routed(spatial_dims, input, weight, bias, stride, padding, dilation, groups):
    """An eager call whose arguments bwdconv normalised itself, routed and
    made in C++ as the replacement's calls are (docs/DESIGN.md,
    "Pass-through"): None when it goes to the original function,
    NotImplemented when the Python path makes it, else bwdconv's op's result."""
    if export_ops or _observers or _is_compiling():
        return NotImplemented
    return _C.functional_call(spatial_dims, (input, weight, bias, stride, padding, dilation,
                                             groups), None)


def _planned_convolution(input, weight, bias, stride, padding, dilation, groups, spatial_dims):
    unbatched = check_input_rank(input, spatial_dims)
    if unbatched:
        input = input.unsqueeze(0)
    stride = expand(stride, spatial_dims, "stride")
    dilation = expand(dilation, spatial_dims, "dilation")
    if isinstance(padding, str):
        if padding == "valid":
            padding = [0] * spatial_dims
        elif padding == "same":
            input, padding, asymmetric = _same_padding(input, weight, stride, dilation, groups,
                                                       spatial_dims)
            # The router reads 'same' padding only where it is symmetric.
            routed = _routed(spatial_dims, input, weight, bias, stride, padding, dilation,
                             groups)
            if routed is None:
                return PASS_THROUGH
            if asymmetric:
                _warn_as_aten_for_asymmetric_same_padding(input, weight, stride, dilation,
                                                          groups, spatial_dims)
            if routed is not NotImplemented:
                return routed.squeeze(0) if unbatched else routed
        else:
            raise ValueError(f"Invalid padding string '{padding}', should be 'same' or 'valid'")
    else:
        padding = expand(padding, spatial_dims, "padding")
    if not (_is_compiling() or _tracing_for_an_artifact()) and (
            _C.settling_restrides(input) or _C.settling_restrides(weight)):
        # The op would lay its output out otherwise (csrc/ops/geometry.h):
        # PyTorch's node computes this call's gradients.
        for observer in _observers:
            observer(input, weight, stride, padding, dilation, groups, None, passed_through=True)
        return PASS_THROUGH
    out = torch.ops.bwdconv.convolution(input, weight, bias, stride, padding, dilation, groups)
    for observer in _observers:
        observer(input, weight, stride, padding, dilation, groups, None)
    return out.squeeze(0) if unbatched else out


def _planned_transposed(input, weight, bias, stride, padding, output_padding, groups, dilation,
                        spatial_dims):
    unbatched = check_input_rank(input, spatial_dims)
    if unbatched:
        input = input.unsqueeze(0)
    stride, padding, output_padding, dilation = (
        expand(value, spatial_dims, name) for value, name in (
            (stride, "stride"), (padding, "padding"), (output_padding, "output_padding"),
            (dilation, "dilation")))
    if any(extra >= step for extra, step in zip(output_padding, stride)) or \
            not all(size > 0 for size in transposed_spatial_output(
                input.shape[2:], weight.shape[2:], stride, padding, dilation, output_padding)):
        # Not planned, as the router does not plan them (docs/DESIGN.md,
        # "Transposed convolutions"): an output padding valid for aten below
        # the dilation only, and an empty output (or a negative one aten
        # refuses). The original takes them, not the op, whose error a
        # traced call could not catch.
        return PASS_THROUGH
    out = torch.ops.bwdconv.conv_transpose(input, weight, bias, stride, padding, output_padding,
                                           groups, dilation)
    for observer in _observers:
        observer(input, weight, stride, padding, dilation, groups, output_padding)
    return out.squeeze(0) if unbatched else out


def _arguments(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """torch.nn.functional.conv*d's signature, its defaults filled in."""
    return input, weight, bias, stride, padding, dilation, groups


def _transposed_arguments(input, weight, bias=None, stride=1, padding=0, output_padding=0,
                          groups=1, dilation=1):
    """torch.nn.functional.conv_transpose*d's signature, its defaults filled in."""
    return input, weight, bias, stride, padding, output_padding, groups, dilation


class _Kind(typing.NamedTuple):
    """What differs between conv*d and conv_transpose*d for the router."""
    originals: dict
    routed_call: typing.Callable  # the C++ routing (docs/DESIGN.md, "Pass-through")
    arguments: typing.Callable
    planned: typing.Callable
    gradient_needed: bool


_CONVOLUTION = _Kind(originals, _C.functional_call, _arguments, _planned_convolution, True)
_TRANSPOSED = _Kind(transposed_originals, _C.transposed_call, _transposed_arguments,
                    _planned_transposed, False)
_is_compiling = torch.compiler.is_compiling


def _python_path(kind, spatial_dims, args, kwargs):
    """The call planned by bwdconv's Python path, or the original called with
    the arguments exactly as given (so that its errors read the same)."""
    try:
        arguments = kind.arguments(*args, **kwargs)
    except TypeError:
        arguments = None
    if arguments is not None and _plans(*arguments[:3], gradient_needed=kind.gradient_needed):
        try:
            result = kind.planned(*arguments, spatial_dims)
            if result is not PASS_THROUGH:
                return result
        except (RuntimeError, ValueError, TypeError, IndexError) as error:
            # An invalid call: the original raises PyTorch's own error. A
            # valid one that strict forcing refused raises the refusal.
            if _C.forcing()[2]:
                kind.originals[spatial_dims](*args, **kwargs)
                raise error
    return kind.originals[spatial_dims](*args, **kwargs)


def _replacement(kind, spatial_dims, name, doc):
    """bwdconv's `name`. Eager calls are routed, and made, in C++ first, in
    this one frame: the original takes every call bwdconv does not plan and
    every call planned for aten, so that PyTorch's own autograd node serves
    it; bwdconv's op takes the others, called from C++. Traced calls
    (torch.compile, export with export_ops), calls that explain_model
    observes and calls whose arguments only Python normalises take the
    Python path (_python_path)."""
    originals, routed_call = kind.originals, kind.routed_call

    def replacement(*args, **kwargs):
        if not (export_ops or _observers or _is_compiling()):
            result = routed_call(spatial_dims, args, kwargs)
            if result is None:
                return originals[spatial_dims](*args, **kwargs)
            if result is not NotImplemented:
                return result
        return _python_path(kind, spatial_dims, args, kwargs)

    replacement.__name__ = replacement.__qualname__ = name
    replacement.__doc__ = doc
    replacement.__signature__ = inspect.signature(kind.arguments)
    return replacement


conv1d, conv2d, conv3d = (
    _replacement(_CONVOLUTION, dims, f"conv{dims}d",
                 f"torch.nn.functional.conv{dims}d, with the backward planned by bwdconv.")
    for dims in (1, 2, 3))
conv_transpose1d, conv_transpose2d, conv_transpose3d = (
    _replacement(_TRANSPOSED, dims, f"conv_transpose{dims}d",
                 f"torch.nn.functional.conv_transpose{dims}d, planned by bwdconv forward "
                 "and backward.")
    for dims in (1, 2, 3))


# torch.jit.script resolves torch.nn.functional's convolutions to aten's by
# identity; the replacements script to the same ops.
for _function in (conv1d, conv2d, conv3d, conv_transpose1d, conv_transpose2d, conv_transpose3d):
    torch.jit._builtins._register_builtin(_function, f"aten::{_function.__name__}")


SCOPES = ("functional", "aten")

_lock = threading.Lock()
_originals = {}  # name -> the torch.nn.functional function bwdconv replaced
# name -> (bwdconv's replacement, the table of originals it calls, spatial dims)
_REPLACEMENTS = {
    replacement.__name__: (replacement, table, dims)
    for table, replacements in ((originals, (conv1d, conv2d, conv3d)),
                                (transposed_originals,
                                 (conv_transpose1d, conv_transpose2d, conv_transpose3d)))
    for dims, replacement in enumerate(replacements, start=1)
}


def _check_scope(scope):
    if scope not in SCOPES:
        raise ValueError(f"unknown scope {scope!r}; expected one of {', '.join(SCOPES)}")


def _scopes(scope):
    if scope is None:
        return SCOPES
    _check_scope(scope)
    return (scope,)


def _set_export_ops(value):
    global export_ops  # enable's argument of the same name hides it there
    export_ops = value


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
        _set_export_ops(export_ops)
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
                _set_export_ops(False)


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
