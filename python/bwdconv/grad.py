"""Convolution gradients with torch.nn.grad's signatures, computed by bwdconv."""

import torch

from . import _library  # noqa: F401  (registers the ops)
from ._args import expand

__all__ = [
    "conv1d_input",
    "conv2d_input",
    "conv3d_input",
    "conv1d_weight",
    "conv2d_weight",
    "conv3d_weight",
]


def _params(stride, padding, dilation, spatial_dims):
    return (
        expand(stride, spatial_dims, "stride"),
        expand(padding, spatial_dims, "padding"),
        expand(dilation, spatial_dims, "dilation"),
    )


def _input_grad(input_size, weight, grad_output, stride, padding, dilation, groups, dims):
    stride, padding, dilation = _params(stride, padding, dilation, dims)
    return torch.ops.bwdconv.convolution_backward_input(
        grad_output, weight, list(input_size), stride, padding, dilation, groups
    )


def _weight_grad(input, weight_size, grad_output, stride, padding, dilation, groups, dims):
    stride, padding, dilation = _params(stride, padding, dilation, dims)
    return torch.ops.bwdconv.convolution_backward_weight(
        grad_output, input, list(weight_size), stride, padding, dilation, groups
    )


def conv1d_input(input_size, weight, grad_output, stride=1, padding=0, dilation=1, groups=1):
    """Gradient of conv1d with respect to its input (torch.nn.grad.conv1d_input)."""
    return _input_grad(input_size, weight, grad_output, stride, padding, dilation, groups, 1)


def conv2d_input(input_size, weight, grad_output, stride=1, padding=0, dilation=1, groups=1):
    """Gradient of conv2d with respect to its input (torch.nn.grad.conv2d_input)."""
    return _input_grad(input_size, weight, grad_output, stride, padding, dilation, groups, 2)


def conv3d_input(input_size, weight, grad_output, stride=1, padding=0, dilation=1, groups=1):
    """Gradient of conv3d with respect to its input (torch.nn.grad.conv3d_input)."""
    return _input_grad(input_size, weight, grad_output, stride, padding, dilation, groups, 3)


def conv1d_weight(input, weight_size, grad_output, stride=1, padding=0, dilation=1, groups=1):
    """Gradient of conv1d with respect to its weight (torch.nn.grad.conv1d_weight)."""
    return _weight_grad(input, weight_size, grad_output, stride, padding, dilation, groups, 1)


def conv2d_weight(input, weight_size, grad_output, stride=1, padding=0, dilation=1, groups=1):
    """Gradient of conv2d with respect to its weight (torch.nn.grad.conv2d_weight)."""
    return _weight_grad(input, weight_size, grad_output, stride, padding, dilation, groups, 2)


def conv3d_weight(input, weight_size, grad_output, stride=1, padding=0, dilation=1, groups=1):
    """Gradient of conv3d with respect to its weight (torch.nn.grad.conv3d_weight)."""
    return _weight_grad(input, weight_size, grad_output, stride, padding, dilation, groups, 3)
