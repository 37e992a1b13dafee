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
