"""Autotuning: measured plans on the user's own device, verified against aten.

The first time a backward call's key is seen with autotuning on, every
strategy that can serve each wanted gradient (swap1x1 once per writer) is run
on the call's real operands:

1. Verification: each candidate's gradient is compared with aten's, with the
   accuracy rule (bwdconv._accuracy): in float64 it must match aten to 1e-10
   (relative to the gradient's magnitude); in other dtypes its error against
   a float64 reference must be at most twice aten's error in the same dtype
   under the same TF32 flags, or what a correct accumulation may lose (the
   TF32 bound where TF32 is on), plus one rounding of the dtype. A candidate
   that fails is excluded for that key, and one warning names it, the shape
   and the error.
2. Timing: a warm-up call each, then rounds that time every candidate once, in
   an order drawn at random each round, until each median is stable (spread / sqrt(rounds)
   below 1%) or the key's time cap is spent; CUDA/HIP events on a GPU, a
   monotonic clock on the CPU. On the CPU a sample times one call; on a GPU
   it times calls_per_sample back-to-back calls between one pair of events
   and divides by their count, the same count for every candidate of the
   decision (one call each, timed after the warm-up, sets it), so that a
   sample is not one call from an idle GPU with the launch latency in it.
   Every round times each candidate once, so each candidate's time pairs
   with aten's of the same round: their ratio is what load on the machine
   (another process's threads, a thread descheduled for a time slice) moves
   least, as it falls on both sides of a pair alike.
   A transposed forward that autograd records is timed with aten's backward
   after it (_then_backward). The candidates run under no_grad.
3. What the user pays: every candidate but aten has the per-call cost of
   bwdconv's op over PyTorch's own node added to each of its times
   (_overhead.call_costs, measured once per process), since a call planned
   for aten passes through to PyTorch's node. A candidate that wins its
   kernel time by less than that cost does not replace aten.
4. The noise rule: the candidate with the lowest median ratio to aten
   replaces aten only when median(ratio) * (1 + noise) < 1, where noise is
   the spread of its ratios (twice their median absolute deviation over
   their median: the relative interquartile range of a symmetric
   distribution, robust to outliers), and at least NOISE_FLOOR. Otherwise
   aten is kept. The decision records the ratio's median and spread, and the
   machine's load average where the operating system gives one.

Before it is timed, each verified candidate's peak memory is measured on one
more call, its gradient included, and aten's as PyTorch's own backward takes
it; a candidate above aten's peak plus the memory budget is excluded, however
fast (_memory: by default the bytes of the gradient it writes), unless it
takes no more than the strategy the rules plan, which runs without tuning.

Decisions go to the persistent cache (_cache.py) and to the calling
thread's plan cache, through resolve_plan (csrc/ops/plans.h), which asks the
hook after forcing and before the rules. Cached
decisions apply whether or not autotuning is on. No tuning happens during
CUDA/HIP graph capture, torch.compile tracing (fake or meta tensors), with
forward-mode AD active, or once the process's budget is spent: the cached
decision or the rules decide then.
"""

import atexit
import contextlib
import datetime
import functools
import math
import os
import statistics
import sys
import threading
import time
import warnings

import torch

from . import _accuracy, _cache, _keys, _memory, _overhead, _settings
from ._args import transposed_spatial_output
from ._library import _C

__all__ = ["autotuning", "set_autotune", "is_autotuning", "clear_decisions", "decisions"]

NOISE_FLOOR = 0.02       # a win must exceed 2% even when the measured noise is lower
STABLE = 0.01            # spread / sqrt(rounds) below which a median is stable
MIN_ROUNDS = 5
MAX_ROUNDS = 50
KEY_SECONDS = 2.0        # BWDCONV_AUTOTUNE_KEY_SECONDS (_apply_environment)
SAMPLE_SECONDS = 1e-3    # a GPU sample lasts at least about this long (calls_per_sample)
MAX_CALLS_PER_SAMPLE = 32
BUDGET_SECONDS = 300.0   # BWDCONV_AUTOTUNE_BUDGET (_apply_environment)
PROGRESS_AFTER_SECONDS = 3.0  # tuning this long in a process starts its progress lines
PROGRESS_EVERY_SECONDS = 5.0


class _State:
    def __init__(self):
        self.lock = threading.Lock()
        self.autotune = False     # BWDCONV_AUTOTUNE (_apply_environment)
        self.spent = 0.0          # seconds of tuning in this process
        self.tuned = 0            # keys tuned in this process
        self.timer = None         # test-only: (gradient, label) -> seconds
        self.peak = None          # test-only: (gradient, label, measured bytes) -> bytes
        self.memory_budget = _memory.parse_memory_budget("gradient")
        self.call_cost = None     # test-only: seconds per call instead of the measured cost
        self.progress = None      # callable(key) told before each key is tuned
        self.reported_at = None   # tuning seconds spent at the last progress line
        self.cache = _cache.DecisionCache()


_state = _State()


def _apply_environment():
    """BWDCONV_AUTOTUNE, BWDCONV_AUTOTUNE_BUDGET, BWDCONV_AUTOTUNE_KEY_SECONDS
    and BWDCONV_MEMORY_BUDGET, read at import (bwdconv._settings)."""
    global KEY_SECONDS, BUDGET_SECONDS
    KEY_SECONDS, BUDGET_SECONDS, _state.memory_budget, autotune = _settings.each(
        lambda: _settings.from_environment("BWDCONV_AUTOTUNE_KEY_SECONDS", _settings.seconds,
                                           KEY_SECONDS),
        lambda: _settings.from_environment("BWDCONV_AUTOTUNE_BUDGET", _settings.seconds,
                                           BUDGET_SECONDS),
        lambda: _settings.from_environment(
            "BWDCONV_MEMORY_BUDGET", lambda name, text: _memory.parse_memory_budget(text, name),
            _state.memory_budget),
        lambda: _settings.from_environment("BWDCONV_AUTOTUNE", _settings.flag, False))
    set_autotune(autotune)


def set_autotune(on):
    """Switches autotuning on or off for the process (BWDCONV_AUTOTUNE=1 at
    import switches it on)."""
    _settings.bool_argument("set_autotune", "on", on)
    with _state.lock:
        _state.autotune = bool(on)
        if on:  # keys the rules decided are asked again, and the hook's shortcut withdrawn
            _C.forget_decisions()


def is_autotuning():
    return _state.autotune


def set_memory_budget(budget):
    """How much more memory than aten a tuned choice may take
    (_memory.parse_memory_budget); decisions already measured keep theirs."""
    _state.memory_budget = _memory.parse_memory_budget(budget)


@contextlib.contextmanager
def autotuning(on=True):
    """Autotuning on (or off) for the body of a `with` block."""
    previous = _state.autotune
    set_autotune(on)
    try:
        yield
    finally:
        set_autotune(previous)


@contextlib.contextmanager
def rules_only():
    """Measured decisions ignored for the body of a `with` block: the
    planner's rules decide (the benchmark's column for the rules)."""
    _C.use_decisions(False)
    try:
        yield
    finally:
        _C.use_decisions(True)


def clear_decisions():
    """Forgets every measured decision, in this process and in the cache file."""
    _state.cache.clear()
    _C.forget_decisions()


def decisions():
    """{key: entry} of every decision in the cache file and this process."""
    return _state.cache.entries()


def decision_for(request):
    """The cache entry of a call (request_of), or None."""
    return _state.cache.get(_keys.key_of(request))


# ---- the hook resolve_plan calls--------------------------------------------

def _answer(entry):
    """The C++ table's form of a cache entry."""
    answer = {}
    for gradient, decided in entry["gradients"].items():
        answer[gradient] = (decided["choice"], decided.get("writer"), decided["reason"])
    return answer


def _why_not_now(request):
    """Why tuning cannot happen for this call now (the rules or cache decide),
    or None."""
    operands = [request[n] for n in ("grad_output", "input", "weight") if request[n] is not None]
    # A wanted gradient is timed on grad_output and its other operand: the
    # weight for the input gradient, the input for the weight gradient.
    needed = ["grad_output"] + ["weight"] * request.get("wants_input", False) + \
        ["input"] * request.get("wants_weight", False)
    if any(request[n] is None for n in needed):
        return "no operands (explain, or a call whose operands come later)"
    if any(t.device.type == "meta" or isinstance(t, torch._subclasses.FakeTensor)
           for t in operands):
        return "fake or meta tensors"
    if torch.compiler.is_compiling():
        return "torch.compile tracing"
    if torch.autograd.forward_ad._current_level >= 0:
        return "forward-mode AD"
    if operands[0].is_cuda:
        with torch.cuda.device(operands[0].device):  # the operands' stream, not the current GPU's
            if torch.cuda.is_current_stream_capturing():
                return "graph capture"
    return None


def _publish_shortcut():
    """While nothing is tuned, what the hook answers for a key the cache
    lacks is known: the rules. The C++ lookup is given the sizes of the
    cached decisions and answers the other calls itself (csrc/ops/plans.h,
    HookShortcut), until autotuning is switched on, the decisions are
    forgotten or the cache's location changes (seen by the calls planned
    after the change)."""
    with _state.lock:
        if (_state.autotune and _state.spent < BUDGET_SECONDS) or _C.has_hook_shortcut():
            return
        sizes = [_keys.sizes_in_key(key) for key in _state.cache.entries()]
        if None not in sizes:  # a key of another form: the hook stays asked
            location = [(n, os.environ.get(n)) for n in _cache.LOCATION_VARIABLES]
            _C.set_hook_shortcut(sizes, location)


def _hook(request):
    if request["device"] != "cpu" and not torch.cuda.is_available():
        return "rules"  # explain() of a GPU shape on a machine without one
    key = _keys.key_of(request)
    entry = _state.cache.get(key)
    if entry is not None:
        return _answer(entry)
    if not _state.autotune or _state.spent >= BUDGET_SECONDS:
        _publish_shortcut()
        return "rules"
    if _why_not_now(request):
        return None
    (_state.progress or _report_progress)(key)
    started = time.perf_counter()
    then_backward = _keys.recorded_forward(request)
    try:
        # The candidates' own calls record nothing; on a GPU, the operands'
        # device is current (events, streams and memory counters are its).
        with torch.no_grad(), _operands_device(request):
            entry = _measure(request, key, then_backward)
    finally:
        with _state.lock:
            _state.spent += time.perf_counter() - started
            _state.tuned += 1
    _state.cache.put(key, entry)
    return _answer(entry)


def _report_progress(key):
    """A line on stderr before a shape is tuned, once tuning has taken
    PROGRESS_AFTER_SECONDS in this process, and then at most every
    PROGRESS_EVERY_SECONDS, so that a long first step says what it does."""
    spent = _state.spent
    if spent < PROGRESS_AFTER_SECONDS or (
            _state.reported_at is not None and spent - _state.reported_at < PROGRESS_EVERY_SECONDS):
        return
    _state.reported_at = spent
    shape = key.split(" | ")[6] if key.count(" | ") >= 6 else key
    print(f"bwdconv: autotuning a new shape ({_state.tuned} tuned, {spent:.0f} s of the "
          f"{BUDGET_SECONDS:g} s budget so far): {shape}", file=sys.stderr, flush=True)


# ---- measuring ---------------------------------------------------------------

def _operands_device(request):
    """The operands' GPU as the current device, for measuring them: a tensor
    on cuda:1 while cuda:0 is current would otherwise be timed with cuda:0's
    events and memory counters."""
    device = request["grad_output"].device
    return torch.cuda.device(device) if device.type == "cuda" else contextlib.nullcontext()

def _label(candidate):
    strategy, writer = candidate
    return f"{strategy}[{writer}]" if writer else strategy


def _accuracy_check(aten, run, terms):
    """A function giving (error, bound) for a candidate's result: the
    accuracy rule (see the module docstring), its references computed once."""
    if aten.dtype == torch.float64:
        scale = aten.abs().max().item()
        return lambda value: (_accuracy.errors([value], [aten])[0], 1e-10 * max(scale, 1.0))
    reference = run(("aten", None), to=torch.float64)
    magnitude = run(("aten", None), to=torch.float64, absolute=True)
    ((_, bound),) = _accuracy.bounds(aten.dtype, [aten], [reference], [magnitude], [terms])
    return lambda value: (_accuracy.errors([value], [reference])[0], bound)


def _timer_for(device):
    """A function timing `calls` back-to-back calls of fn and giving the
    seconds per call: CUDA/HIP events around all of them on a GPU (the calls
    queue on the stream as in a training loop, one synchronize at the end),
    a monotonic clock on the CPU (where _time asks for one call)."""
    if device.type == "cuda":
        def timed(fn, calls=1):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(calls):
                fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / 1e3 / calls
        return timed

    def timed(fn, calls=1):
        started = time.perf_counter()
        for _ in range(calls):
            fn()
        return (time.perf_counter() - started) / calls
    return timed


def calls_per_sample(warm_seconds, cap):
    """How many back-to-back calls one GPU timing sample times, given one
    call's seconds of each candidate after its warm-up; the same count for
    every candidate of a decision, so that their times compare (the same
    share of launch latency and of pipelining in each).

    Enough calls that the fastest candidate's sample lasts SAMPLE_SECONDS,
    so that every sample lasts at least that: the fastest and aten are what
    the noise rule compares, while the slowest is often far from both (at
    several times aten) and would leave the count at 1 where batching matters. At least 1, at
    most MAX_CALLS_PER_SAMPLE, and no more than lets MIN_ROUNDS rounds of
    every candidate fit in `cap` seconds, so that a slow candidate repeated
    does not take the tuner past the key's time cap when one call of each
    did not."""
    fastest, total = min(warm_seconds), sum(warm_seconds)
    calls = MAX_CALLS_PER_SAMPLE if fastest <= 0 else math.ceil(SAMPLE_SECONDS / fastest)
    if total > 0:
        calls = min(calls, math.floor(cap / (MIN_ROUNDS * total)))
    return max(1, min(calls, MAX_CALLS_PER_SAMPLE))


def _relative_spread(samples):
    """The spread of the middle half of the samples relative to their median,
    estimated as twice the median absolute deviation: the interquartile range
    of a symmetric distribution, but not moved by up to half the samples
    being outliers (a thread descheduled for a time slice on a shared CPU)."""
    median = statistics.median(samples)
    return 2 * statistics.median(abs(s - median) for s in samples) / median


def call_cost():
    """Seconds a call served by bwdconv's op costs beyond PyTorch's own node."""
    if _state.call_cost is not None:
        return _state.call_cost
    return _overhead.call_costs()["op"]


def _time(gradient, fns, device, cap):
    """({label: [seconds per call, ...]}, calls per sample): warm-up, then
    rounds in a random order (_overhead.samples_in_rounds) until every median
    is stable or `cap` seconds are spent; every label but aten with the
    per-call cost of bwdconv's op added (step 3 of the module docstring). On
    a GPU each sample times calls_per_sample back-to-back calls, chosen once
    from one call of each candidate after the warm-up; on the CPU one call."""
    timed = _timer_for(device)
    injected = _state.timer
    for fn in fns.values():
        fn()
    started = time.perf_counter()
    calls = 1
    if device.type == "cuda":
        calls = calls_per_sample([timed(fn) for fn in fns.values()], cap)

    def sample(label, _):
        seconds = timed(fns[label], calls)
        return injected(gradient, label) if injected else seconds

    def enough(samples):
        rounds = min(len(s) for s in samples.values())
        stable = all(_relative_spread(s) / math.sqrt(rounds) < STABLE for s in samples.values())
        return rounds >= MIN_ROUNDS and (stable or time.perf_counter() - started > cap)

    samples = _overhead.samples_in_rounds(list(fns), range(MAX_ROUNDS), sample, enough)
    cost = call_cost()
    return {label: s if label == "aten" else [t + cost for t in s]
            for label, s in samples.items()}, calls


def _verified(gradient, candidates, run, shape, dtype, terms):
    """(candidates that agree with aten, {label: why excluded}); `terms`: the
    products each element of the gradient sums."""
    check = _accuracy_check(run(("aten", None)), run, terms)
    kept, excluded = [("aten", None)], {}
    for candidate in candidates:
        if candidate[0] == "aten":
            continue
        error, bound = check(run(candidate))
        if error <= bound:  # False for NaN
            kept.append(candidate)
            continue
        why = (f"disagrees with aten: error {error:.3g} above the bound {bound:.3g}")
        excluded[_label(candidate)] = why
        warnings.warn(f"bwdconv autotune: {_label(candidate)} {why} for the {gradient} gradient "
                      f"of {shape} ({dtype}); excluded for this shape", RuntimeWarning)
    return kept, excluded


def _ratio_summary(ratios):
    return {"median": round(statistics.median(ratios), 4),
            "spread": round(_relative_spread(ratios), 4), "n": len(ratios)}


def _summary(samples):
    return {**_overhead.quartiles_us([s * 1e6 for s in samples]), "n": len(samples)}


def _ratios_to_aten(samples, label):
    """Per round, `label`'s time over aten's in the same round."""
    return [t / a for t, a in zip(samples[label], samples["aten"])]


def decide(samples):
    """(label, speedup over aten, noise, reason): the noise rule of the module
    docstring applied to {label: [seconds per round]} ("aten" among the
    labels, every list one time per round)."""
    ratios = {label: _ratios_to_aten(samples, label) for label in samples if label != "aten"}
    if not ratios:
        return "aten", 1.0, 0.0, "aten is the only candidate"
    median = {label: statistics.median(r) for label, r in ratios.items()}
    best = min(ratios, key=median.get)
    noise = max(NOISE_FLOOR, _relative_spread(ratios[best]))
    speedup = 1 / median[best]
    if median[best] * (1 + noise) < 1:
        return best, speedup, noise, (f"{best} {speedup:.2f}x faster than aten, round by round, "
                                      f"above the noise {noise:.1%}")
    return "aten", 1.0, noise, (f"nothing beat aten by more than the noise {noise:.1%} "
                                f"(best: {best} {speedup:.2f}x, round by round)")


def _load_average():
    """The machine's one-minute load average, where the system gives one."""
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


def _output_padding(input, weight, output_size, stride, padding, dilation):
    """The output padding of a transposed convolution of this output size."""
    without_padding = transposed_spatial_output(input.shape[2:], weight.shape[2:], stride,
                                                padding, dilation, [0] * len(stride))
    return [o - n for o, n in zip(output_size[2:], without_padding)]


def _aten_transposed_forward(input, weight, output_size, stride, padding, dilation, groups):
    """aten's conv_transpose(input, weight) of this output size: what a
    transposed convolution's forward costs without bwdconv (the matching
    input gradient runs other kernels in aten)."""
    output_padding = _output_padding(input, weight, output_size, stride, padding, dilation)
    return torch.ops.aten.convolution(input, weight, None, stride, padding, dilation, True,
                                      output_padding, groups)


def _then_backward(forward, request, args, grad):
    """`forward` (a transposed forward's candidate) followed by aten's
    backward of that convolution with the gradient `grad` of its output: the
    step a user pays. Timed alone, a forward can win by a few percent that
    the backward after it gives back (docs/tuning.md, "What is timed")."""
    x, w = request["grad_output"], request["weight"]
    stride, padding, dilation, groups = args
    output_padding = _output_padding(x, w, grad.shape, stride, padding, dilation)
    mask = [x.requires_grad, w.requires_grad, False]

    def step():
        forward()
        return torch.ops.aten.convolution_backward(grad, x, w, None, stride, padding, dilation,
                                                   True, output_padding, groups, mask)
    return step


def _terms(gradient, dy, request):
    """The accuracy rule's K for `gradient` of the call (bwdconv._accuracy)."""
    terms = _accuracy.gradient_terms(dy.shape, request["weight_size"], request["groups"])
    return terms[0] if gradient == "input" else terms[1]


def _measure(request, key, then_backward):
    """The cache entry for a call: per wanted gradient, the verified
    candidates' times, the excluded ones and the decision. `then_backward`:
    a transposed forward is timed with the backward that follows it
    (_then_backward)."""
    dy = request["grad_output"]
    args = (request["stride"], request["padding"], request["dilation"], request["groups"])
    wanted = [g for g in ("input", "weight") if request[f"wants_{g}"]]
    measured_at = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    entry = {"measured_at": measured_at, "call_cost_us": round(call_cost() * 1e6, 2),
             "gradients": {}}
    for gradient in wanted:
        operand = request["weight"] if gradient == "input" else request["input"]
        sizes = request[f"{gradient}_size"]

        def run(candidate, to=None, absolute=False, operand=operand, sizes=sizes,
                gradient=gradient):
            g_out, other = (dy, operand) if to is None else (dy.to(to), operand.to(to))
            if absolute:  # the accuracy rule's magnitude (bwdconv._accuracy)
                g_out, other = g_out.abs(), other.abs()
            if candidate[0] == "aten" and gradient == "input" and request["transposed"]:
                return _aten_transposed_forward(g_out, other, sizes, *args)
            return _C.gradient_with(gradient, candidate[0], candidate[1], g_out, other, sizes,
                                    *args)

        candidates = [tuple(c) for c in request["candidates"][gradient]]
        kept, excluded = _verified(gradient, candidates, run, key.split(" | ")[-2],
                                   request["dtype"], _terms(gradient, dy, request))
        aten = functools.partial(run, ("aten", None)) \
            if request["transposed"] and gradient == "input" \
            else _memory.pytorch_backward(gradient, dy, operand, request, args)
        calls = {_label(c): aten if c[0] == "aten" else functools.partial(run, c) for c in kept}
        injected = functools.partial(_state.peak, gradient) if _state.peak else None
        peaks = _memory.peaks(calls, dy.device, injected)
        budget = _memory.memory_budget_bytes(_state.memory_budget, sizes, request["dtype"],
                                             peaks["aten"])
        rules = request["rules"][gradient]
        rules_peak = max((peak for label, peak in peaks.items() if label.split("[")[0] == rules),
                         default=0)
        excluded.update(_memory.over_budget(peaks, budget, rules_peak))
        kept = [c for c in kept if _label(c) not in excluded]
        fns = {_label(c): functools.partial(run, c) for c in kept}
        if gradient == "input" and then_backward:
            grad = torch.randn(sizes, dtype=dy.dtype, device=dy.device)  # dense, as a model's
            fns = {label: _then_backward(fn, request, args, grad) for label, fn in fns.items()}
            entry["timed"] = "the transposed forward, then aten's backward of it"
        samples, calls = _time(gradient, fns, dy.device, KEY_SECONDS / len(wanted))
        label, speedup, noise, why = decide(samples)
        choice = next(c for c in kept if _label(c) == label)
        entry["gradients"][gradient] = {
            "choice": choice[0], "writer": choice[1], "speedup": round(speedup, 3),
            "noise": round(noise, 4), "rules": request["rules"][gradient],
            "reason": f"measured on this device {measured_at}: {why}",
            "times": {label: _summary(s) for label, s in samples.items()},
            "ratios_to_aten": {label: _ratio_summary(_ratios_to_aten(samples, label))
                               for label in samples if label != "aten"},
            "load_average": _load_average(),
            "calls_per_sample": calls, "peak_bytes": peaks, "memory_budget_bytes": budget,
            "excluded": excluded,
        }
    if len(wanted) == 2 and any(d["choice"] != "aten" for d in entry["gradients"].values()):
        _pair_against_aten(request, entry, args)
    return entry


def _pair_against_aten(request, entry, args):
    """A call that wants both gradients: aten computes them in one call, often
    for little more than one of them (oneDNN), so the per-gradient winners
    must also beat that single call together, by the same noise rule; if
    they do not, aten computes both."""
    gi, gw = entry["gradients"]["input"], entry["gradients"]["weight"]
    dy, x, w = request["grad_output"], request["input"], request["weight"]
    pair = f"{_label((gi['choice'], gi['writer']))}+{_label((gw['choice'], gw['writer']))}"

    def both(input_strategy, writer, weight_strategy):
        return functools.partial(_C.gradients_with, input_strategy, writer, weight_strategy, dy,
                                 x, w, *args)

    samples, calls = _time("both", {"aten": both("aten", None, "aten"),
                             pair: both(gi["choice"], gi["writer"], gw["choice"])},
                    dy.device, KEY_SECONDS / 2)
    label, speedup, noise, why = decide(samples)
    entry["both"] = {"times": {lb: _summary(s) for lb, s in samples.items()},
                     "calls_per_sample": calls, "speedup": round(speedup, 3), "noise": round(noise, 4)}
    if label == "aten":
        for decided in (gi, gw):
            if decided["choice"] != "aten":
                decided.update(choice="aten", writer=None, speedup=1.0, reason=(
                    f"measured on this device {entry['measured_at']}: {pair} beat aten gradient "
                    f"by gradient, but not aten's single call for both: {why}"))


_C.set_tuning_hook(_hook)
atexit.register(_C.set_tuning_hook, None)
