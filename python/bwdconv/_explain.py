"""bwdconv.explain: which strategy serves each gradient of a convolution, and why."""

import contextlib
import os

import torch
from torch._prims_common import suggest_memory_format

from ._args import expand
from ._library import _C

__all__ = [
    "explain",
    "Explanation",
    "force_strategy",
    "forced_strategy",
    "strategies",
    "served",
    "reset_served",
]

_DTYPES = {
    torch.float64: "float64",
    torch.float32: "float32",
    torch.float16: "float16",
    torch.bfloat16: "bfloat16",
}


def strategies():
    """The names of every strategy this build knows."""
    return list(_C.strategies())


def served():
    """How many input and weight gradients each strategy has computed since the
    last reset_served(): {"input": {"aten": n, ...}, "weight": {...}}."""
    return _C.served_counts()


def reset_served():
    """Sets every served() count back to zero."""
    _C.reset_served_counts()


class Explanation:
    """A plan, readable (str) and as a dict (to_dict)."""

    def __init__(self, plan, input_size, weight_size, stride, padding, dilation, groups):
        self._plan = dict(plan)
        self._plan.update(
            input_size=list(input_size),
            weight_size=list(weight_size),
            stride=list(stride),
            padding=list(padding),
            dilation=list(dilation),
            groups=groups,
        )

    def to_dict(self):
        return dict(self._plan)

    @property
    def input_strategy(self):
        return self._plan["input"]["strategy"]

    @property
    def weight_strategy(self):
        return self._plan["weight"]["strategy"]

    @property
    def phases(self):
        """Every phase of the input gradient: residue, taps per dim, empty or not."""
        return [dict(p) for p in self._plan["phases"]]

    def __str__(self):
        p = self._plan
        lines = [
            f"conv{p['spatial_dims']}d input {p['input_size']} weight {p['weight_size']} "
            f"stride {p['stride']} padding {p['padding']} dilation {p['dilation']} "
            f"groups {p['groups']} -> output {p['output_size']} "
            f"({p['dtype']}, {p['layout']}, {p['device']})",
        ]
        for gradient in ("input", "weight"):
            plan = p[gradient]
            lines.append(f"  {gradient} gradient: {plan['strategy']} ({plan['reason']})")
            for c in plan["candidates"]:
                if c["strategy"] != plan["strategy"]:
                    verdict = "ranked lower" if c["serves"] else "refused"
                    lines.append(f"    {c['strategy']}: {verdict}: {c['reason']}")
        if "swap1x1" in p:
            writer = p["swap1x1"]
            lines.append(f"  swap1x1 writes dx: {writer['writer']} ({writer['reason']})")
        phases = p["phases"]
        empty = sum(ph["empty"] for ph in phases)
        taps = ", ".join("x".join(map(str, ph["taps"])) for ph in phases if not ph["empty"])
        lines.append(
            f"  phases: {len(phases)} ({len(phases) - empty} with taps {taps}; {empty} empty)"
        )
        return "\n".join(lines)

    __repr__ = __str__


def _sizes(x):
    return list(x.shape) if isinstance(x, torch.Tensor) else [int(v) for v in x]


def explain(input, weight, stride=1, padding=0, dilation=1, groups=1, *, dtype=None,
            channels_last=None, device=None):
    """The plan bwdconv makes for conv(input, weight) with these arguments.

    `input` and `weight` are tensors or size sequences (N, C, spatial...).
    `dtype` (a torch dtype), `channels_last` and `device` ("cpu", "cuda" or
    "hip") default to the input tensor's, or to float32, contiguous, cpu for sizes.
    """
    input_size, weight_size = _sizes(input), _sizes(weight)
    spatial_dims = len(weight_size) - 2
    if spatial_dims not in (1, 2, 3):
        raise ValueError(f"expected a 3-D, 4-D or 5-D weight, got size {weight_size}")
    stride = expand(stride, spatial_dims, "stride")
    padding = expand(padding, spatial_dims, "padding")
    dilation = expand(dilation, spatial_dims, "dilation")
    tensor = input if isinstance(input, torch.Tensor) else None
    if dtype is None:
        dtype = tensor.dtype if tensor is not None else torch.float32
    if channels_last is None:
        channels_last = tensor is not None and \
            suggest_memory_format(tensor) != torch.contiguous_format
    if device is None:
        on_gpu = tensor is not None and tensor.is_cuda
        device = ("hip" if torch.version.hip else "cuda") if on_gpu else "cpu"
    plan = _C.plan(input_size, weight_size, stride, padding, dilation, groups,
                   _DTYPES.get(dtype, "other"), bool(channels_last), device)
    return Explanation(plan, input_size, weight_size, stride, padding, dilation, groups)


def forced_strategy():
    """The strategy every plan is forced to use, or None."""
    return _C.forcing()[0]


@contextlib.contextmanager
def force_strategy(name, *, swap1x1_writer=None):
    """Forces strategy `name` (None: plan freely) for the body of a `with` block;
    `swap1x1_writer` ("fused" or "in_place") also forces how swap1x1 writes dx."""
    previous = _C.forcing()
    _C.set_forcing(name, swap1x1_writer)
    try:
        yield
    finally:
        _C.set_forcing(*previous)


def _apply_environment():
    """BWDCONV_STRATEGY=<name> forces a strategy for the whole process, and
    BWDCONV_SWAP1X1_WRITER=<fused|in_place> how swap1x1 writes dx."""
    _C.set_forcing(os.environ.get("BWDCONV_STRATEGY") or None,
                   os.environ.get("BWDCONV_SWAP1X1_WRITER") or None)
