"""bwdconv.explain: which strategy serves each gradient of a convolution, and why."""

import collections
import contextlib

import torch

from . import _keys, _settings, _tune
from ._args import expand, transposed_spatial_output
from ._library import _C
from ._memory import megabytes

__all__ = [
    "explain",
    "Explanation",
    "force_strategy",
    "forced_strategy",
    "strategies",
    "registry",
    "served",
    "reset_served",
]


StrategyEntry = collections.namedtuple("StrategyEntry", "name gradients deterministic kernel")
StrategyEntry.__doc__ = """One strategy of the extension's registry: its name, the gradients it
computes ("input", "weight"), whether it gives the same bits on every call under
torch.use_deterministic_algorithms, per device kind ({"cpu": bool, "gpu": bool}),
and the csrc/hip kernel it launches on a GPU (None for none)."""


def registry():
    """Every strategy this build knows, in the registry's order (csrc/dispatch/strategies.h)."""
    return [StrategyEntry(e["name"], tuple(e["gradients"]), dict(e["deterministic"]), e["kernel"])
            for e in _C.strategy_registry()]


def strategies(gradient=None):
    """The names of every strategy this build knows, or of those that compute
    `gradient` ("input" or "weight")."""
    if gradient not in (None, "input", "weight"):
        raise ValueError(f"expected gradient 'input', 'weight' or None, got {gradient!r}")
    return [e.name for e in registry() if gradient is None or gradient in e.gradients]


def swap1x1_writers():
    """The names of the ways swap1x1 can write dx (csrc/dispatch/swap1x1.h):
    fused and in_place."""
    return list(_C.swap1x1_writers())


# What explain_model's own forward passes computed, by `measured`: not the
# user's work, so served() leaves it out.
_uncounted = {False: collections.Counter(), True: collections.Counter()}


def served(measured=False):
    """How many input and weight gradients, and transposed convolutions'
    forwards, each strategy has computed since the last reset_served():
    {"input": {"aten": n, ...}, "weight": {...}, "forward": {...}} (the keys of
    explain_model(...).counts()); `measured=True`: only those a measured
    decision (autotuning) chose."""
    counts = _C.served_counts(measured)
    return {gradient: {strategy: n - _uncounted[measured][gradient, strategy]
                       for strategy, n in per_strategy.items()}
            for gradient, per_strategy in counts.items()}


def reset_served():
    """Sets every served() count back to zero."""
    _C.reset_served_counts()
    for uncounted in _uncounted.values():
        uncounted.clear()


@contextlib.contextmanager
def not_counted_in_served():
    """What the body of the `with` block computes is left out of served()."""
    before = {measured: served(measured) for measured in _uncounted}
    try:
        yield
    finally:
        for measured, uncounted in _uncounted.items():
            for gradient, per_strategy in served(measured).items():
                for strategy, n in per_strategy.items():
                    uncounted[gradient, strategy] += n - before[measured][gradient][strategy]


class Explanation:
    """A plan, readable (str) and as a dict (to_dict)."""

    def __init__(self, plan, input_size, weight_size, stride, padding, dilation, groups,
                 measurement=None, transposed_input_size=None, gradients=("input", "weight")):
        self._plan = dict(plan)
        if measurement is not None:
            self._plan["measurement"] = measurement
        self._plan.update(
            transposed_input_size=transposed_input_size,
            input_size=list(input_size),
            weight_size=list(weight_size),
            stride=list(stride),
            padding=list(padding),
            dilation=list(dilation),
            groups=groups,
            gradients=list(gradients),
        )

    def to_dict(self):
        return dict(self._plan)

    @property
    def input_strategy(self):
        return self._plan["input"]["strategy"]

    @property
    def weight_strategy(self):
        return self._plan["weight"]["strategy"]

    def serves(self, strategy, gradient):
        """Whether `strategy` can compute `gradient` ("input" or "weight") of this convolution."""
        return any(c["strategy"] == strategy and c["serves"]
                   for c in self._plan[gradient]["candidates"])

    @property
    def phases(self):
        """Every phase of the input gradient: residue, taps per dim, empty or not."""
        return [dict(p) for p in self._plan["phases"]]

    def __str__(self):
        p = self._plan
        arguments = (f"weight {p['weight_size']} stride {p['stride']} padding {p['padding']} "
                     f"dilation {p['dilation']} groups {p['groups']}")
        formats = f"({p['dtype']}, {p['layout']}, {p['device']})"
        transposed = p["transposed_input_size"] is not None
        if transposed:
            lines = [f"conv_transpose{p['spatial_dims']}d input {p['transposed_input_size']} "
                     f"{arguments} -> output {p['input_size']} {formats}",
                     "  input gradient: aten (a forward convolution)"]
        else:
            lines = [f"conv{p['spatial_dims']}d input {p['input_size']} {arguments} "
                     f"-> output {p['output_size']} {formats}"]
        labels = {"input": "forward (the matching input gradient)" if transposed
                  else "input gradient", "weight": "weight gradient"}
        for gradient in ("input", "weight"):
            plan = p[gradient]
            if gradient not in p["gradients"]:
                lines.append(f"  {labels[gradient]}: not computed (gradients={p['gradients']})")
                continue
            lines.append(f"  {labels[gradient]}: {plan['strategy']} ({plan['reason']})")
            if plan.get("measured") and "measurement" in p:
                lines += _measurement_lines(p["measurement"]["gradients"][gradient])
            for c in plan["candidates"]:
                if c["strategy"] != plan["strategy"]:
                    # A serving candidate's reason says how it ranked.
                    verdict = "" if c["serves"] else "refused: "
                    lines.append(f"    {c['strategy']}: {verdict}{c['reason']}")
        if "swap1x1" in p:
            writer = p["swap1x1"]
            lines.append(f"  swap1x1 writes dx: {writer['writer']} ({writer['reason']})")
            lines += [f"    {name}: refused: {why}" for name, why in writer["refusals"].items()
                      if why is not None]
        if p.get("strict_forcing_refusal"):
            lines.append(f"  strict forcing: backward raises: {p['strict_forcing_refusal']}")
        phases = p["phases"]
        empty = sum(ph["empty"] for ph in phases)
        taps = ", ".join("x".join(map(str, ph["taps"])) for ph in phases if not ph["empty"])
        lines.append(
            f"  phases: {len(phases)} ({len(phases) - empty} with taps {taps}; {empty} empty)"
        )
        return "\n".join(lines)

    __repr__ = __str__


def _measurement_lines(measured):
    """The times and peak memory of a measured decision, and the candidates excluded."""
    lines = []
    peaks = measured.get("peak_bytes", {})  # absent from decisions measured before memory was
    for label, t in measured["times"].items():
        peak = f", peak {megabytes(peaks[label])}" if label in peaks else ""
        lines.append(f"    measured {label}: median {t['median_us']:.1f} us "
                     f"(p25 {t['p25_us']:.1f}, p75 {t['p75_us']:.1f}, {t['n']} runs){peak}")
    if "memory_budget_bytes" in measured:
        lines.append(f"    memory budget: {megabytes(measured['memory_budget_bytes'])} above "
                     f"aten's peak")
    for label, why in measured["excluded"].items():
        lines.append(f"    excluded {label}: {why}")
    return lines


def _sizes(x):
    return list(x.shape) if isinstance(x, torch.Tensor) else [int(v) for v in x]


def _transposed_output_size(input_size, weight_size, stride, padding, dilation, groups,
                            output_padding):
    """conv_transpose's output size: the matching convolution's input size."""
    return [input_size[0], weight_size[1] * groups] + transposed_spatial_output(
        input_size[2:], weight_size[2:], stride, padding, dilation, output_padding)


def explain(input, weight, stride=1, padding=0, dilation=1, groups=1, *, dtype=None,
            channels_last=None, device=None, weight_channels_last=None, device_index=None,
            transposed=False, output_padding=0, training=False, gradients=("input", "weight")):
    """The plan bwdconv makes for conv(input, weight) with these arguments.

    `input` and `weight` are tensors or size sequences (N, C, spatial...).
    `dtype` (a torch dtype), `channels_last` and `device` ("cpu", "cuda" or
    "hip") default to the input tensor's, or to float32, contiguous, cpu for sizes;
    `channels_last` to the layout PyTorch computes a convolution of the two
    tensors in (channels_last where either suggests it);
    `weight_channels_last` to the weight tensor's layout (contiguous for sizes).
    `gradients` are those the backward computes ("input", "weight" or both; a
    first layer's input needs none): a decision measured by autotuning for
    that backward shows with its times (`to_dict()["measurement"]`).

    `transposed=True` explains conv_transpose(input, weight) with
    `output_padding`: its forward is the input gradient of the matching
    convolution (docs/DESIGN.md, "Transposed convolutions") and shows as the
    plan's "input" entry, with a decision measured for it; its weight gradient
    is that convolution's weight gradient; its input gradient is a forward
    convolution, aten's. A transposed forward is tuned and decided for
    training (autograd records it, and its backward is timed after it) apart
    from inference: `training=True` shows the decision for training.
    """
    wants = _wanted_gradients(gradients)
    input_size, weight_size = _sizes(input), _sizes(weight)
    spatial_dims = len(weight_size) - 2
    if spatial_dims not in (1, 2, 3):
        raise ValueError(f"expected a 3-D, 4-D or 5-D weight, got size {weight_size}")
    stride = expand(stride, spatial_dims, "stride")
    padding = expand(padding, spatial_dims, "padding")
    dilation = expand(dilation, spatial_dims, "dilation")
    # A transposed convolution's input (its dtype, layout and device) is the
    # matching convolution's grad_output; its output that convolution's input.
    request = _keys.request_of(input, weight, stride, padding, dilation, groups,
                               wants_input=transposed or "input" in wants,
                               wants_weight=not transposed and "weight" in wants, dtype=dtype,
                               channels_last=channels_last, device=device,
                               weight_channels_last=weight_channels_last,
                               device_index=device_index, transposed=transposed,
                               records_autograd=training)
    if transposed:
        output_padding = expand(output_padding, spatial_dims, "output_padding")
        request["input_size"] = _transposed_output_size(input_size, weight_size, stride, padding,
                                                        dilation, groups, output_padding)
    plan = _C.plan(request["input_size"], weight_size, stride, padding, dilation, groups,
                   request["dtype"], request["layout"] == "channels_last", request["device"],
                   request["weight_layout"] == "channels_last", request["device_index"],
                   transposed, training, request["wants_input"], request["wants_weight"])
    return Explanation(plan, request["input_size"], weight_size, stride, padding, dilation,
                       groups, _measurement(plan, request), transposed_input_size=input_size
                       if transposed else None, gradients=("input", "weight") if transposed
                       else wants)


def _wanted_gradients(gradients):
    wanted = (gradients,) if isinstance(gradients, str) else tuple(gradients)
    if not wanted or any(g not in ("input", "weight") for g in wanted):
        raise ValueError(f"explain(): gradients={gradients!r}: expected 'input', 'weight' "
                         "or both")
    return wanted


def _measurement(plan, request):
    """The decisions measured for the plan's gradients, in one entry, or None.
    A transposed convolution's weight gradient is decided as the matching
    convolution's weight gradient alone, under a key of its own."""
    measured = [g for g in ("input", "weight") if plan[g]["measured"]]
    if not measured:
        return None
    if not request["transposed"]:
        return _tune.decision_for(request)
    weight_request = dict(request, wants_input=False, wants_weight=True, weight_layout=None,
                          transposed=False, records_autograd=False)
    entries = {"input": _tune.decision_for(request),
               "weight": _tune.decision_for(weight_request)}
    entry = dict(entries[measured[0]])
    entry["gradients"] = {g: entries[g]["gradients"][g] for g in measured}
    return entry


def forced_strategy():
    """The strategy every plan is forced to use, or None."""
    return _C.forcing()[0]


def _checked_forcing(name, swap1x1_writer, strict):
    """force_strategy's arguments, once each is one the planner knows."""
    if name is not None:
        _settings.choice("force_strategy(): name", name, strategies())
    if swap1x1_writer is not None:
        _settings.choice("force_strategy(): swap1x1_writer", swap1x1_writer, swap1x1_writers())
    return name, swap1x1_writer, _settings.bool_argument("force_strategy", "strict", strict)


def force_strategy(name, *, swap1x1_writer=None, strict=False):
    """Forces strategy `name` (None: plan freely) for the body of a `with` block;
    `swap1x1_writer` (one of swap1x1_writers()) also forces how swap1x1 writes
    dx. The arguments are checked here, where they are given.

    The forced strategy computes every gradient it can serve, and a
    transposed convolution's forward when it can; the others are planned as
    usual (explain and served() say which), and a forced writer that cannot
    serve gives way to the planner's. A gradient is planned when its backward
    runs, so a forward inside the block with its backward after the block
    is planned without the forcing. With `strict=True`, a call the strategy
    or the writer cannot serve raises ValueError instead: a transposed
    forward when it runs, a gradient when its backward runs."""
    return _forcing(*_checked_forcing(name, swap1x1_writer, strict))


@contextlib.contextmanager
def _forcing(name, swap1x1_writer, strict):
    previous = _C.forcing()
    _C.set_forcing(name, swap1x1_writer, strict)
    try:
        yield
    finally:
        _C.set_forcing(*previous)


def _apply_environment():
    """BWDCONV_STRATEGY=<name> forces a strategy for the whole process,
    BWDCONV_SWAP1X1_WRITER=<writer> how swap1x1 writes dx, and
    BWDCONV_STRATEGY_STRICT=1 makes that forcing strict (see force_strategy)."""
    strict, name, writer = _settings.each(
        lambda: _settings.from_environment("BWDCONV_STRATEGY_STRICT", _settings.flag, False),
        lambda: _settings.from_environment("BWDCONV_STRATEGY", _settings.choice_of(*strategies()),
                                           None),
        lambda: _settings.from_environment("BWDCONV_SWAP1X1_WRITER",
                                           _settings.choice_of(*swap1x1_writers()), None))
    _C.set_forcing(name, writer, strict)
