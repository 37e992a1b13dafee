"""Argument normalisation shared by the functional and grad APIs."""

import torch

_SPATIAL_NAMES = {1: "conv1d", 2: "conv2d", 3: "conv3d"}


def op_name(spatial_dims):
    return _SPATIAL_NAMES[spatial_dims]


def expand(value, spatial_dims, name):
    """An int or a sequence of ints as a list of one value per spatial dim."""
    if isinstance(value, torch.SymInt) or isinstance(value, int):
        return [value] * spatial_dims
    values = list(value)
    if len(values) == 1:
        return values * spatial_dims
    if len(values) != spatial_dims or not all(isinstance(v, (int, torch.SymInt)) for v in values):
        raise RuntimeError(
            f"expected {name} to be a single integer value or a list of {spatial_dims} "
            f"values to match the convolution dimensions, but got {name}={value}"
        )
    return values


def transposed_spatial_output(input, filter, stride, padding, dilation, output_padding):
    """A transposed convolution's output sizes per spatial dim:
    (I - 1)s - 2p + d(K - 1) + output_padding + 1 (docs/DESIGN.md,
    "Transposed convolutions")."""
    return [(i - 1) * s - 2 * p + d * (k - 1) + op + 1 for i, k, s, p, d, op in zip(
        input, filter, stride, padding, dilation, output_padding)]


def check_input_rank(input, spatial_dims):
    """True when `input` is unbatched; raises for a rank conv*d does not take."""
    if input.dim() == spatial_dims + 1:
        return True
    if input.dim() == spatial_dims + 2:
        return False
    raise RuntimeError(
        f"Expected {spatial_dims + 1}D (unbatched) or {spatial_dims + 2}D (batched) input to "
        f"{op_name(spatial_dims)}, but got input of size: {list(input.shape)}"
    )
