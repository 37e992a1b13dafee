"""bwdconv.conv1d/conv2d/conv3d: torch.nn.functional's signatures, bwdconv's backward."""

import torch

from . import _library  # noqa: F401  (registers the ops)
from ._args import check_input_rank, expand

__all__ = ["conv1d", "conv2d", "conv3d"]

_pad = torch.nn.functional.pad

# Callables told about every convolution with its final operands and
# arguments (see bwdconv.explain_model).
_observers = []


def _same_padding(input, weight, stride, dilation, spatial_dims):
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
    return input, left


def convolution(input, weight, bias, stride, padding, dilation, groups, spatial_dims):
    unbatched = check_input_rank(input, spatial_dims)
    if unbatched:
        input = input.unsqueeze(0)
    stride = expand(stride, spatial_dims, "stride")
    dilation = expand(dilation, spatial_dims, "dilation")
    if isinstance(padding, str):
        if padding == "valid":
            padding = [0] * spatial_dims
        elif padding == "same":
            input, padding = _same_padding(input, weight, stride, dilation, spatial_dims)
        else:
            raise ValueError(f"Invalid padding string '{padding}', should be 'same' or 'valid'")
    else:
        padding = expand(padding, spatial_dims, "padding")
    for observer in _observers:
        observer(input, weight, stride, padding, dilation, groups)
    out = torch.ops.bwdconv.convolution(input, weight, bias, stride, padding, dilation, groups)
    return out.squeeze(0) if unbatched else out


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """torch.nn.functional.conv1d, with the backward planned by bwdconv."""
    return convolution(input, weight, bias, stride, padding, dilation, groups, 1)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """torch.nn.functional.conv2d, with the backward planned by bwdconv."""
    return convolution(input, weight, bias, stride, padding, dilation, groups, 2)


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """torch.nn.functional.conv3d, with the backward planned by bwdconv."""
    return convolution(input, weight, bias, stride, padding, dilation, groups, 3)
