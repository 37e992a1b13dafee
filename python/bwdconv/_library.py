"""Loads the compiled operator library and registers its fake (meta) kernels."""

import torch

from ._version import check_torch

# A torch older than the supported minimum gets one clear error here, before
# anything of bwdconv (or of torch it relies on) is loaded.
check_torch(torch.__version__)

from torch._prims_common import (  # noqa: E402
    make_channels_last_strides_for,
    make_contiguous_strides_for,
    suggest_memory_format,
)

try:
    from . import _C
except ImportError as error:  # most often: built against another torch
    raise ImportError(
        f"bwdconv's compiled extension could not be loaded ({error}). It must be built "
        f"against the installed torch {torch.__version__}: reinstall bwdconv with "
        "`pip install --no-build-isolation .`"
    ) from error

__all__ = ["_C"]


def _gradient_memory_format(a, b):
    """PyTorch's layout rule for convolution gradients (meta_convolution_backward),
    but for an operand dense in the default layout, which counts as
    contiguous whatever it suggests: a size-1 dim leaves its stride free, and
    torch.compile may run the op on a tensor with another stride there than
    the one it traced (csrc/ops/geometry.h, op_gradient_memory_format)."""
    for tensor in (a, b):
        fmt = suggest_memory_format(tensor)
        if fmt != torch.contiguous_format and not tensor.is_contiguous():
            return fmt
    return torch.contiguous_format


def _check_same_device(a, a_name, b, b_name):
    torch._check(
        a.device == b.device,
        lambda: f"expected {a_name} and {b_name} on the same device, but got {a_name} on "
        f"{a.device} and {b_name} on {b.device}",
    )


def _check_backward_operands(grad_output, other, other_name, sizes, sizes_name, stride):
    torch._check(
        grad_output.dim() in (3, 4, 5),
        lambda: f"expected grad_output to be 3-D, 4-D or 5-D, got size {tuple(grad_output.shape)}",
    )
    torch._check(
        len(sizes) == grad_output.dim() and other.dim() == grad_output.dim(),
        lambda: f"expected {sizes_name} and {other_name} of rank {grad_output.dim()}",
    )
    torch._check(
        len(stride) == grad_output.dim() - 2,
        lambda: f"expected one stride per spatial dim, got stride={list(stride)}",
    )
    _check_same_device(grad_output, "grad_output", other, other_name)
    torch._check(
        grad_output.dtype == other.dtype,
        lambda: f"grad_output type ({grad_output.dtype}) and {other_name} type "
        f"({other.dtype}) should be the same",
    )


def _empty_gradient(sizes, grad_output, memory_format):
    return torch.empty(sizes, dtype=grad_output.dtype, device=grad_output.device,
                       memory_format=memory_format)


def _settled(tensor):
    """csrc/ops/geometry.h's settled(): the view the op's kernel reads, with
    the strides a fresh tensor has in the layout `tensor` is dense in."""
    if tensor.is_contiguous():
        return tensor.as_strided(tensor.shape, make_contiguous_strides_for(tensor.shape))
    for dims, layout in ((4, torch.channels_last), (5, torch.channels_last_3d)):
        if tensor.dim() == dims and tensor.is_contiguous(memory_format=layout):
            return tensor.as_strided(tensor.shape, make_channels_last_strides_for(tensor.shape))
    return tensor


@torch.library.register_fake("bwdconv::convolution")
def _convolution_fake(input, weight, bias, stride, padding, dilation, groups):
    _check_same_device(input, "input", weight, "weight")
    return torch.ops.aten.convolution.default(
        _settled(input), _settled(weight), bias, stride, padding, dilation, False,
        [0] * len(stride), groups
    )


@torch.library.register_fake("bwdconv::conv_transpose")
def _conv_transpose_fake(input, weight, bias, stride, padding, output_padding, groups, dilation):
    _check_same_device(input, "input", weight, "weight")
    return torch.ops.aten.convolution.default(
        input, weight, bias, stride, padding, dilation, True, output_padding, groups
    )


@torch.library.register_fake("bwdconv::convolution_backward_input")
def _backward_input_fake(grad_output, weight, input_size, stride, padding, dilation, groups):
    _check_backward_operands(grad_output, weight, "weight", input_size, "input_size", stride)
    return _empty_gradient(input_size, grad_output, _gradient_memory_format(grad_output, weight))


@torch.library.register_fake("bwdconv::convolution_backward_weight")
def _backward_weight_fake(grad_output, input, weight_size, stride, padding, dilation, groups):
    _check_backward_operands(grad_output, input, "input", weight_size, "weight_size", stride)
    return _empty_gradient(weight_size, grad_output, _gradient_memory_format(input, grad_output))


@torch.library.register_fake("bwdconv::convolution_backward")
def _backward_fake(grad_output, input, weight, stride, padding, dilation, groups):
    _check_backward_operands(grad_output, weight, "weight", input.shape, "input", stride)
    _check_same_device(input, "input", weight, "weight")
    return (
        _empty_gradient(input.shape, grad_output, _gradient_memory_format(grad_output, weight)),
        _empty_gradient(weight.shape, grad_output, _gradient_memory_format(input, grad_output)),
    )
