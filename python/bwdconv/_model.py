"""bwdconv.explain_model: which strategy serves each convolution of a model."""

import collections

import torch

from . import _explain, functional
from .functional import enabled
from ._explain import explain

__all__ = ["explain_model", "ModelExplanation"]


class ModelExplanation:
    """One entry per convolution call in a forward pass: the layer, its shapes,
    whether it is transposed, the strategy of its forward (aten's for a
    convolution; planned for a transposed one) and of the gradients that
    backward will compute (None for a gradient nothing asks for, e.g. the
    input gradient of the first layer), and whether a measured decision
    (autotuning) chose each."""

    def __init__(self, layers):
        self.layers = layers

    def counts(self):
        """{"input": {strategy: n}, "weight": {...}}: what one backward should
        serve; "forward": {strategy: n} for the transposed layers' forwards
        (served()'s keys and counts). A transposed layer's input gradient, a
        forward convolution bwdconv does not plan, is not counted there."""
        counts = {"input": collections.Counter(), "weight": collections.Counter(),
                  "forward": collections.Counter()}
        for layer in self.layers:
            for gradient in ("input", "weight"):
                if layer[gradient] and not (gradient == "input" and layer["transposed"]):
                    counts[gradient][layer[gradient]] += 1
            if layer["transposed"]:
                counts["forward"][layer["forward"]] += 1
        return {g: dict(c) for g, c in counts.items()}

    def __str__(self):
        rows = [("layer", "input", "weight", "stride", "forward", "input grad", "weight grad")]
        for layer in self.layers:
            name = layer["name"] + (" (transposed)" if layer["transposed"] else "")
            rows.append((name, "x".join(map(str, layer["input_size"])),
                         "x".join(map(str, layer["weight_size"])),
                         "x".join(map(str, layer["stride"])), _strategy_cell(layer, "forward"),
                         _strategy_cell(layer, "input"), _strategy_cell(layer, "weight")))
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        lines = ["  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip() for row in rows]
        lines.insert(1, "  ".join("-" * w for w in widths))
        return "\n".join(lines)

    __repr__ = __str__


def _strategy_cell(layer, gradient):
    """The strategy, marked when a measurement on this device chose it."""
    strategy = layer[gradient]
    if not strategy:
        return "-"
    return f"{strategy} (measured)" if layer["measured"][gradient] else strategy


def _module_names(model):
    """Pre/post forward hooks that keep a stack of the running module names."""
    stack, handles = [], []
    for name, module in model.named_modules():
        handles.append(module.register_forward_pre_hook(
            lambda m, a, name=name: stack.append(name)))
        handles.append(module.register_forward_hook(lambda m, a, o: stack.pop() and None))
    return stack, handles


def _computed_dtype(input):
    """The dtype a convolution of `input` computes in: autocast's where it is
    on for the input's device and casts the input, else the input's."""
    device = input.device.type
    if torch.is_autocast_enabled(device) and input.is_floating_point() and \
            input.dtype != torch.float64:
        return torch.get_autocast_dtype(device)
    return input.dtype


def explain_model(model, *example_inputs, **example_kwargs):
    """Runs one forward pass of `model` with bwdconv enabled and returns, for
    every convolution it calls, the plan bwdconv makes for it as training (or
    inference, under no_grad) runs it: under autocast in autocast's dtype. The
    model's buffers (batch-norm statistics) are restored afterwards, and the
    pass is not counted in served()."""
    layers = []
    saved_buffers = [(b, b.detach().clone()) for b in model.buffers()]
    stack, handles = _module_names(model)

    def observe(input, weight, stride, padding, dilation, groups, output_padding,
                passed_through=False):
        transposed = output_padding is not None
        # The gradients backward computes: none under no_grad.
        wanted = [g for g, t in (("input", input), ("weight", weight))
                  if torch.is_grad_enabled() and t.requires_grad]
        # As the call computes: in autocast's dtype under autocast, and, for a
        # transposed forward that autograd records, decided for training.
        plan = explain(input, weight, stride, padding, dilation, groups, transposed=transposed,
                       output_padding=output_padding or 0, dtype=_computed_dtype(input),
                       training=bool(wanted), gradients=wanted or ("input", "weight"))
        measured = {g: plan.to_dict()[g]["measured"] for g in ("input", "weight")}
        strategies = {"input": plan.input_strategy, "weight": plan.weight_strategy}
        if passed_through and not functional.is_enabled("aten"):
            # PyTorch's node computes the gradients (the aten scope would plan them).
            for g, strategy in strategies.items():
                if strategy != "aten":
                    strategies[g], measured[g] = "aten", False
        layers.append({
            "name": stack[-1] if stack and stack[-1] else "<model>",
            "transposed": transposed,
            "input_size": list(input.shape), "weight_size": list(weight.shape),
            "stride": list(stride), "padding": list(padding),
            "dilation": list(dilation), "groups": groups,
            # A transposed convolution's forward is the matching input
            # gradient; its own input gradient is aten's forward convolution.
            "forward": plan.input_strategy if transposed else "aten",
            "input": ("aten" if transposed else strategies["input"])
            if "input" in wanted else None,
            "weight": strategies["weight"] if "weight" in wanted else None,
            "measured": {"forward": transposed and measured["input"],
                         "input": not transposed and measured["input"],
                         "weight": measured["weight"]},
        })

    functional._observers.append(observe)
    try:
        with enabled(), _explain.not_counted_in_served():
            model(*example_inputs, **example_kwargs)
    finally:
        functional._observers.remove(observe)
        for h in handles:
            h.remove()
        with torch.no_grad():
            for buffer, value in saved_buffers:
                buffer.copy_(value)
    return ModelExplanation(layers)
