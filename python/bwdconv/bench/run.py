"""Times aten, every strategy that can serve a case and the planner's choice."""

import functools
import math
import statistics

import torch

import bwdconv
from bwdconv import _accuracy, _keys, _memory, _overhead, _tune

from . import device as dev
from .driver import BACKWARD_DATA, BACKWARD_WEIGHT, DIRECTION_NAMES, FORWARD

def forced_strategies(gradient):
    """The registry's strategies that compute `gradient`, but aten (timed as the baseline)."""
    return [name for name in bwdconv.strategies(gradient) if name != "aten"]


def _layout(case, channels_last):
    if not channels_last:
        return torch.contiguous_format
    return torch.channels_last if case.spatial_dims == 2 else torch.channels_last_3d


def make_operands(case, device, seed=0):
    """x, w, dy in the case's dtype and layouts, and (stride, padding, dilation, groups)."""
    g = torch.Generator(device="cpu").manual_seed(seed)

    def tensor(sizes, channels_last):
        t = torch.randn(sizes, generator=g).to(device, case.dtype)
        return t.contiguous(memory_format=_layout(case, channels_last))

    x = tensor(case.input_size(), case.channels_last)
    w = tensor(case.weight_size(), case.filter_channels_last)
    args = (list(case.stride), list(case.padding), list(case.dilation), case.groups)
    y = torch.ops.aten.convolution(x, w, None, *args[:3], case.transposed,
                                   _output_padding(case), args[3])
    dy = tensor(y.shape, case.channels_last)
    return x, w, dy, args


def _output_padding(case):
    return list(case.output_padding) if case.transposed else [0] * case.spatial_dims


def flops(case, output):
    """2 * N * K * C/g * prod(output) * prod(filter): the same for every direction."""
    return 2 * case.batch * case.out_channels * (case.in_channels // case.groups) * \
        math.prod(output) * math.prod(case.filter)


def bytes_moved(x, w, dy):
    """The least traffic of any direction: two of x, w, dy read once and the
    third written once."""
    return sum(t.numel() * t.element_size() for t in (x, w, dy))


def aten_call(direction, case, args, x, w, dy):
    """The direction's result through aten."""
    stride, padding, dilation, groups = args
    if direction == FORWARD:
        return torch.ops.aten.convolution(x, w, None, stride, padding, dilation, case.transposed,
                                          _output_padding(case), groups)
    mask = [direction == BACKWARD_DATA, direction == BACKWARD_WEIGHT, False]
    return torch.ops.aten.convolution_backward(
        dy, x, w, None, stride, padding, dilation, case.transposed, _output_padding(case),
        groups, mask)[mask.index(True)]


ROUNDS = 5  # timing rounds; each round times every entry, in an order drawn at random


PLANNED = (None, None)  # an entry's forcing: (strategy, swap1x1 writer); None plans freely
TUNED = "tuned"  # an entry run with autotuning on: its first call (a warm-up) tunes


def forcing(forced):
    """A context that forces an entry's (strategy, swap1x1 writer); for the
    planned entry the planner's rules alone, for the tuned one autotuning."""
    if forced == TUNED:
        return _tune.autotuning()
    if forced == PLANNED:
        return _tune.rules_only()
    return bwdconv.force_strategy(forced[0], swap1x1_writer=forced[1], strict=True)


def tuned_choice(direction, x, w, args, case, dy):
    """The strategy autotuning chose for this call, or "-" (no decision)."""
    if case.transposed:
        if direction == FORWARD:  # keyed as the matching input gradient
            plan = bwdconv.explain(x, w, *args, transposed=True,
                                   output_padding=list(case.output_padding)).to_dict()
            measured = plan.get("measurement")
            entry = measured if plan["input"]["measured"] else None
        else:  # the matching weight gradient: input dy, grad_output x
            entry = _tune.decision_for(_keys.request_of(dy, w, *args, wants_input=False))
    else:
        entry = _tune.decision_for(_keys.request_of(
            x, w, *args, wants_input=direction == BACKWARD_DATA,
            wants_weight=direction == BACKWARD_WEIGHT))
    if entry is None:
        return "-"
    decided = next(iter(entry["gradients"].values()))
    return f"{decided['choice']}[{decided['writer']}]" if decided.get("writer") \
        else decided["choice"]


def forced_entries(plan, gradient, fn, strategies):
    """(name, fn, forcing) for each strategy that serves; swap1x1 once per
    writer worth timing where there are several ("swap1x1[fused]",
    "swap1x1[in_place]": the plan's "timed" writers)."""
    entries = []
    for s in strategies:
        if not plan.serves(s, gradient):
            continue
        writers = plan.to_dict()["swap1x1"]["timed"] if s == "swap1x1" else []
        if len(writers) > 1:
            entries += [(f"{s}[{w}]", fn, (s, w)) for w in writers]
        else:
            entries.append((s, fn, (s, None)))
    return entries


def _timed(entries, device, warmup, iterations):
    """{name: per-call times}: after `warmup` calls each, the iterations split
    into ROUNDS rounds (bench.device.time_in_rounds)."""
    rounds = min(ROUNDS, iterations)
    counts = [iterations // rounds + (1 if r < iterations % rounds else 0) for r in range(rounds)]
    return dev.time_in_rounds({name: (fn, functools.partial(forcing, forced))
                               for name, fn, forced in entries}, device, counts, warmup)


def _peaks(entries, device):
    """({name: the peak bytes one call adds, its result included}, the bytes
    of aten's result): one more call each, after the timing."""
    peaks, result_bytes = {}, None
    for name, fn, forced in entries:
        with forcing(forced), _memory.peak_memory(device) as peak:
            result = fn()
        peaks[name] = peak.bytes
        if name == "aten":
            result_bytes = result.numel() * result.element_size()
        del result
    return peaks, result_bytes


def add_call_costs(times, choices):
    """The bwdconv and tuned columns as a user's call pays them, for the
    choice {name: choice}: a call planned for aten passes through to aten's
    own call (docs/DESIGN.md, "Pass-through"), so it pays aten's time plus the
    lookup; a strategy pays its gradient's time plus the op's per-call cost
    (bwdconv._overhead). The forced strategies' columns stay the gradient's
    time alone."""
    costs = _overhead.call_costs()
    for name, choice in choices.items():
        if choice == "aten":
            times[name] = [t + costs["pass_through"] * 1e3 for t in times["aten"]]
        else:
            times[name] = [t + costs["op"] * 1e3 for t in times[name]]


def add_call_peaks(peaks, choices):
    """The bwdconv and tuned columns' peak memory as a user's call takes it: a
    call planned for aten passes through to aten's own call, so it takes
    aten's peak (bwdconv's op, timed for the other columns, would give aten a
    stand-in operand, on a GPU an allocation of its size)."""
    for name, choice in choices.items():
        if choice == "aten":
            peaks[name] = peaks["aten"]


def _terms(direction, x, w, dy, case, groups):
    """The accuracy rule's K for the direction's result (bwdconv._accuracy):
    a transposed forward and weight gradient are the matching convolution's
    gradients, with x as its grad_output; an input gradient (a transposed
    one is a convolution of dy) sums dy's channels of a group times the taps."""
    if direction == BACKWARD_DATA:
        return _accuracy.gradient_terms(dy.shape, w.shape, groups)[0]
    grad_output = x if case.transposed else dy
    terms = _accuracy.gradient_terms(grad_output.shape, w.shape, groups)
    return terms[0] if direction == FORWARD else terms[1]


def _checked(entries, reference, aten_error, limit, rows, base):
    """The entries whose result passes the accuracy rule, and {name: max error};
    a failing entry gets a 'wrong' row and no time."""
    kept, errors = [], {}
    for name, fn, forced in entries:
        if reference is not None and name != "aten":
            with forcing(forced):
                errors[name] = _accuracy.errors([fn()], [reference])[0]
            if not _accuracy.within(errors[name], limit):
                rows.append(dict(base, strategy=name, status="wrong", max_error=errors[name],
                                 aten_max_error=aten_error))
                continue
        kept.append((name, fn, forced))
    return kept, errors


def planned_calls(case, x, w, dy, args):
    """{direction: (plan, gradient, bwdconv's call)} for the directions bwdconv
    plans: a convolution's backward; a transposed convolution's forward (the
    matching input gradient) and weight gradient (the matching one: grad_output
    x, input dy). The rest (a convolution's forward, a transposed one's input
    gradient, a forward convolution) is aten's alone."""
    stride, padding, dilation, groups = args
    if not case.transposed:
        plan = bwdconv.explain(x, w, *args)
        return {BACKWARD_DATA: (plan, "input", lambda: torch.ops.bwdconv.convolution_backward_input(
                    dy, w, list(x.shape), *args)),
                BACKWARD_WEIGHT: (plan, "weight", lambda: torch.ops.bwdconv.convolution_backward_weight(
                    dy, x, list(w.shape), *args))}
    output_padding = list(case.output_padding)
    forward = bwdconv.explain(x, w, *args, transposed=True, output_padding=output_padding)
    return {FORWARD: (forward, "input", lambda: torch.ops.bwdconv.conv_transpose(
                x, w, None, stride, padding, output_padding, groups, dilation)),
            BACKWARD_WEIGHT: (bwdconv.explain(dy, w, *args), "weight",
                              lambda: torch.ops.bwdconv.convolution_backward_weight(
                                  x, dy, list(w.shape), *args))}


def run_case(index, case, device, warmup, iterations, check, peaks, copy_gbps):
    """One result row per (direction, strategy), with its time and the peak
    memory one call adds; `index` numbers the case in its run."""
    x, w, dy, args = make_operands(case, device)
    with _tune.rules_only():  # the plan column is the rules', as is the bwdconv column
        planned = planned_calls(case, x, w, dy, args)
    rows = []
    for direction in case.direction_list():
        plan, gradient, ours = planned.get(direction, (None, None, None))
        aten = functools.partial(aten_call, direction, case, args, x, w, dy)
        chosen = getattr(plan, f"{gradient}_strategy") if plan else None
        reference = aten_error = limit = None
        if check and (direction != FORWARD or case.transposed):
            reference, magnitude = _accuracy.references(
                functools.partial(aten_call, direction, case, args), (x, w, dy))
            # aten's error, and the bound every other entry is held to
            ((aten_error, limit),) = _accuracy.bounds(
                x.dtype, [aten()], [reference], [magnitude],
                [_terms(direction, x, w, dy, case, args[3])])
        entries = [("aten", aten, PLANNED)]
        if ours:  # the planner's rules, the tuned choice, each strategy forced
            entries.append(("bwdconv", ours, PLANNED))
            entries.append(("tuned", ours, TUNED))
            entries += forced_entries(plan, gradient, ours, forced_strategies(gradient))
        base = {"index": index, "case": case.label(), "line": case.line or case.to_line(),
                "direction": DIRECTION_NAMES[direction], "plan": chosen, "status": "ok"}
        entries, errors = _checked(entries, reference, aten_error, limit, rows, base)
        times = _timed(entries, device, warmup, iterations)
        memory, base["result_bytes"] = _peaks(entries, device)
        if ours:
            base["tuned"] = tuned_choice(direction, x, w, args, case, dy)
            choices = {"bwdconv": chosen,
                       "tuned": chosen if base["tuned"] == "-" else base["tuned"]}
            add_call_costs(times, choices)
            add_call_peaks(memory, choices)
        aten_ms = statistics.median(times["aten"])
        for name, _, _ in entries:
            row = dict(base, strategy=name, iterations=iterations, peak_bytes=memory[name],
                       **dev.summary(times[name]))
            if name in errors:
                row["max_error"], row["aten_max_error"] = errors[name], aten_error
            seconds = row["median_ms"] * 1e-3
            row["tflops"] = flops(case, x.shape[2:] if case.transposed else dy.shape[2:]) \
                / seconds / 1e12
            row["gbps"] = bytes_moved(x, w, dy) / seconds / 1e9
            row["roofline"] = _roofline_fraction(row, case, peaks, copy_gbps)
            row["speedup"] = aten_ms / row["median_ms"]
            rows.append(row)
    return rows


def _roofline_fraction(row, case, peaks, copy_gbps):
    """Roofline time / measured time: 1.0 is the bound set by peak compute or bandwidth."""
    dtype = str(case.dtype).replace("torch.", "")
    compute = peaks.get(dtype) if peaks else None
    bandwidth = peaks["gbps"] if peaks else copy_gbps
    bound_s = row["gbps"] * row["median_ms"] * 1e-3 / bandwidth if bandwidth else 0.0
    if compute:
        bound_s = max(bound_s, row["tflops"] * row["median_ms"] * 1e-3 / compute)
    return bound_s / (row["median_ms"] * 1e-3)
