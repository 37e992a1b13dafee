"""Random convolutions and transposed convolutions with unusual operands
(channels_last, sliced, permuted, expanded, a summed output's expanded
gradient) in unusual autograd modes (create_graph, no_grad, inference_mode,
forward AD, torch.func.grad and vmap, a retained graph, mismatched dtypes,
autocast) and through the modules: with bwdconv enabled, in either scope,
planned or with any strategy forced (swap1x1 with any of its writers), its
kernels on the host target or not,
each gives what PyTorch gives without it: the same exception type and
message, or results of the same dtype, shape, strides and requires_grad,
equal within the dtype's tolerance. A call that crashes PyTorch's own CPU
convolution, or whose results PyTorch itself changes from call to call
(docs/limitations.md), is left out, and counted: at most one in a hundred."""

import contextlib
import random
import sys
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
import torch
import torch.autograd.forward_ad as fwAD
import torch.nn.functional as F

import bwdconv

sys.path.append(str(Path(__file__).resolve().parents[1] / "scripts"))
from gpu_random_cases import same_results, survives_in_a_child  # noqa: E402

SEED = 20261128
CASES = 1000
DTYPES = [torch.float64, torch.float32, torch.float32, torch.bfloat16, torch.float16]
# Relative to the reference's largest magnitude (at least 1).
TOLERANCE = {torch.float64: 1e-8, torch.float32: 1e-3, torch.bfloat16: 0.2,
             torch.float16: 0.02}
LAYOUTS = ["contiguous", "channels_last", "sliced", "permuted"]
MODES = ["grad", "create_graph", "no_grad", "inference_mode", "mismatched_dtypes",
         "forward_ad", "func_grad", "vmap", "retained_graph", "autocast", "module"]


@dataclass
class Call:
    transposed: bool
    input_size: tuple
    weight_size: tuple
    stride: list
    padding: list
    dilation: list
    output_padding: list
    groups: int
    bias: bool
    dtype: torch.dtype
    input_layout: str
    weight_layout: str
    gradient_layout: str
    leaves: str  # which of "x", "w", "b" require a gradient
    mode: str
    compiled: bool = False  # the convolution through torch.compile (fullgraph)

    def conv(self, x, w, b):
        # Looked up at each call: the functional scope replaces F's functions.
        f = getattr(F, f"conv{'_transpose' if self.transposed else ''}{len(self.stride)}d")
        if self.transposed:
            args = (self.stride, self.padding, self.output_padding, self.groups, self.dilation)
        else:
            args = (self.stride, self.padding, self.dilation, self.groups)
        if self.compiled:
            return torch.compile(lambda x, w, b: f(x, w, b, *args), fullgraph=True)(x, w, b)
        return f(x, w, b, *args)


def random_call(rng):
    """Any geometry, valid or not: filters larger than the padded input and
    output paddings at the stride's limit give aten's errors or empty outputs."""
    dims = rng.choice([1, 2, 2, 3])
    transposed = rng.random() < 0.4
    groups = rng.choice([1, 1, 2])
    cin, cout = groups * rng.randint(1, 4), groups * rng.randint(1, 4)
    kernel = [rng.randint(1, 4) for _ in range(dims)]
    stride = [rng.choice([1, 2, 2, 3]) for _ in range(dims)]
    dilation = [rng.choice([1, 1, 2]) for _ in range(dims)]
    output_padding = ([rng.randint(0, max(s, d) - 1) for s, d in zip(stride, dilation)]
                      if transposed else [0] * dims)
    weight = (cin, cout // groups) if transposed else (cout, cin // groups)
    return Call(
        transposed=transposed,
        input_size=(rng.randint(1, 3), cin, *[rng.randint(1, 9) for _ in range(dims)]),
        weight_size=(*weight, *kernel),
        stride=stride, padding=[rng.randint(0, 2) for _ in range(dims)], dilation=dilation,
        output_padding=output_padding, groups=groups, bias=rng.random() < 0.5,
        dtype=rng.choice(DTYPES), input_layout=rng.choice(LAYOUTS + ["expanded"]),
        weight_layout=rng.choice(LAYOUTS),
        gradient_layout=rng.choice(["of a sum"] + LAYOUTS[:3]),
        leaves=rng.choice(["x", "w", "b", "xw", "xb", "wb", "xwb"]), mode=rng.choice(MODES))


def laid_out(t, layout):
    """`t`'s values in `layout` (an expanded batch only where it has one sample)."""
    if layout == "channels_last" and t.dim() in (4, 5):
        return t.contiguous(memory_format=torch.channels_last if t.dim() == 4
                            else torch.channels_last_3d)
    if layout == "sliced":
        wide = torch.zeros(*t.shape[:-1], 2 * t.shape[-1], dtype=t.dtype)
        wide[..., ::2] = t
        return wide[..., ::2]
    if layout == "permuted":
        return t.transpose(0, 1).contiguous().transpose(0, 1)
    if layout == "expanded" and t.shape[0] == 1:
        return t[:1].expand(t.shape)
    return t.contiguous()


def operands(call, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(call.input_size, generator=g, dtype=torch.float64).to(call.dtype)
    w = torch.randn(call.weight_size, generator=g, dtype=torch.float64).to(call.dtype)
    channels = call.weight_size[1] * call.groups if call.transposed else call.weight_size[0]
    b = torch.randn(channels, generator=g, dtype=torch.float64).to(call.dtype)
    x, w = laid_out(x, call.input_layout), laid_out(w, call.weight_layout)
    return (x.requires_grad_("x" in call.leaves), w.requires_grad_("w" in call.leaves),
            b.requires_grad_("b" in call.leaves) if call.bias else None)


def leaves(*tensors):
    return [t for t in tensors if t is not None and t.requires_grad]


def module_results(call, x, w, b):
    """nn.Conv*d / nn.ConvTranspose*d with the call's weight and bias; a
    transposed one given its output size (from which it derives the output
    padding)."""
    dims = len(call.stride)
    kind = f"Conv{'Transpose' if call.transposed else ''}{dims}d"
    channels = call.weight_size[1] * call.groups if call.transposed else call.weight_size[0]
    module = getattr(torch.nn, kind)(
        call.input_size[1], channels, call.weight_size[2:], call.stride, call.padding,
        groups=call.groups, bias=call.bias, dilation=call.dilation, dtype=call.dtype)
    with torch.no_grad():
        module.weight.copy_(w)
        if b is not None:
            module.bias.copy_(b)
    if call.transposed:
        output_size = [(i - 1) * s - 2 * p + d * (k - 1) + 1 + op for i, s, p, d, k, op in zip(
            call.input_size[2:], call.stride, call.padding, call.dilation, call.weight_size[2:],
            call.output_padding)]
        y = module(x, output_size=output_size)
    else:
        y = module(x)
    return (y, *torch.autograd.grad(y.sum(), [*leaves(x), *module.parameters()]))


def results(call, seed):
    """The tensors `call.mode` produces."""
    x, w, b = operands(call, seed)
    plain_b = b.detach() if b is not None else None
    if call.mode in ("no_grad", "inference_mode"):
        with torch.no_grad() if call.mode == "no_grad" else torch.inference_mode():
            return (call.conv(x, w, b),)
    if call.mode == "mismatched_dtypes":
        return (call.conv(x.to(torch.float32 if call.dtype == torch.float64 else torch.float64),
                          w, b),)
    if call.mode == "forward_ad":
        with fwAD.dual_level():
            dual = fwAD.make_dual(x.detach(), torch.ones_like(x))
            primal, tangent = fwAD.unpack_dual(call.conv(dual, w.detach(), plain_b))
            return primal.clone(), tangent.clone()
    if call.mode == "func_grad":
        def loss(xx, ww):
            return call.conv(xx, ww, plain_b).square().sum()
        return torch.func.grad(loss, argnums=(0, 1))(x.detach(), w.detach())
    if call.mode == "autocast":
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = call.conv(x, w, b)
        return (y, *torch.autograd.grad(y.float().sum(), leaves(x, w, b)))
    if call.mode == "module":
        return module_results(call, x, w, b)
    if call.mode == "vmap":
        samples = torch.stack([x.detach(), 2 * x.detach()])
        return (torch.func.vmap(lambda xx: call.conv(xx, w.detach(), None))(samples),)
    y = call.conv(x, w, b)
    wanted = leaves(x, w, b)
    if call.mode == "retained_graph":
        first = torch.autograd.grad(y, wanted, torch.ones_like(y), retain_graph=True)
        return (y, *first, *torch.autograd.grad(y, wanted, torch.ones_like(y)))
    if call.gradient_layout == "of a sum":
        return (y, *torch.autograd.grad(y.sum(), wanted, create_graph=call.mode == "create_graph"))
    g = torch.Generator().manual_seed(seed + 1)
    dy = laid_out(torch.randn(y.shape, generator=g, dtype=torch.float64).to(call.dtype),
                  call.gradient_layout)
    return (y, *torch.autograd.grad(y, wanted, dy, create_graph=call.mode == "create_graph"))


def outcome(call, seed):
    try:
        return results(call, seed)
    except Exception as error:  # noqa: BLE001 - the exception itself is compared
        return type(error), str(error)


def value_error(result, reference):
    """(largest difference, the tolerance of the result's dtype there)."""
    scale = max(1.0, reference.detach().double().abs().max().item()) if reference.numel() else 1.0
    error = (result.detach().double() - reference.detach().double()).abs().max().item() \
        if reference.numel() else 0.0
    return error, TOLERANCE[result.dtype] * scale


def differences(call, got, expected, strides=True, values=True):
    """What differs between two outcomes; `strides=False` leaves the strides
    of results out (a compiled graph's are the compiler's to choose),
    `values=False` the values."""
    if raised(expected) or raised(got) or len(got) != len(expected):
        return [] if got == expected else [f"{got} where PyTorch gives {expected}"]
    found = []
    for index, (a, e) in enumerate(zip(got, expected)):
        facts = lambda t: (t.dtype, tuple(t.shape), t.requires_grad,  # noqa: E731
                           [s for s, n in zip(t.stride(), t.shape) if n > 1] if strides else None)
        if facts(a) != facts(e):
            found.append(f"result {index}: {facts(a)} where PyTorch gives {facts(e)}")
        if (a.dtype, a.shape) != (e.dtype, e.shape) or not values:
            continue
        error, tolerance = value_error(a, e)
        both_nan = a.isnan().any().item() and e.isnan().any().item()
        if not error <= tolerance and not both_nan:
            found.append(f"result {index}: off by {error:.3g} (tolerance {tolerance:.3g})")
    return found


def aten_is_off(call, case, got, expected):
    """Whether the values bwdconv's outcome differs in are PyTorch's own
    error: where they differ, bwdconv's result lies within the tolerance of
    the float64 reference (the same call in float64 on the same draws) and
    PyTorch's does not. PyTorch 2.15's CPU bfloat16 transposed convolution
    with a bias is far off on some shapes (docs/limitations.md); a strategy
    adds the bias itself and is right there."""
    if raised(got) or raised(expected) or differences(call, got, expected, values=False):
        return False
    reference = outcome(replace(call, dtype=torch.float64), case)
    if raised(reference) or len(reference) != len(got):
        return False
    aten_off = False
    for ours, atens, exact in zip(got, expected, reference):
        difference, tolerance = value_error(ours, atens)
        if difference <= tolerance:
            continue
        ours_error, _ = value_error(ours, exact)
        aten_error, _ = value_error(atens, exact)
        if ours_error > tolerance or aten_error <= tolerance:
            return False
        aten_off = True
    return aten_off


def may_crash_aten(call):
    """The calls PyTorch's CPU convolution has crashed on: channels_last
    operands in float16 or bfloat16, or in 3-D (docs/limitations.md)."""
    return "channels_last" in (call.input_layout, call.weight_layout, call.gradient_layout) \
        and (call.dtype in (torch.float16, torch.bfloat16) or len(call.stride) == 3)


def raised(result):
    return isinstance(result[0], type)


def dirty_freed_memory(value):
    """Leaves blocks of the CPU allocator's freed memory holding `value`, so
    that a result read from memory nobody wrote shows it."""
    for size in (1 << 10, 1 << 16):
        torch.full((size,), value)


def aten_changes_its_answer(call, case, first, calls=8):
    """Whether PyTorch's own results for the call, run `calls` more times,
    ever differ from `first` bit for bit: its CPU backward reads memory it
    never wrote on some shapes, channels_last inputs and others with size-1
    dims (docs/limitations.md; bfloat16 autocast's weight gradient of a tap no
    input reaches, in 1-D), and a call bwdconv plans for aten is then as
    wrong as aten's, by chance. Freed memory is refilled before each run,
    since what such a read returns otherwise can repeat within a process."""
    if raised(first):
        return False
    for run in range(calls):
        dirty_freed_memory((float("nan"), 1e30, -7.0)[run % 3])
        again = outcome(call, case)
        if raised(again) or not same_results(again, first):
            return True
    return False


@pytest.mark.parametrize("scope", ["functional", "aten"])
def test_random_calls_behave_as_without_bwdconv(scope):
    rng = random.Random(f"{SEED}-{scope}")
    forced = [None, None, *bwdconv.strategies()]
    writers = random.Random(f"{SEED}-{scope}-writers")  # apart: the calls stay as drawn before
    mismatches, modes, raising, crashing, unstable, aten_off = [], set(), 0, 0, 0, 0
    bwdconv.reset_served()
    for case in range(CASES):
        call = random_call(rng)
        strategy = rng.choice(forced)
        writer = writers.choice(bwdconv.swap1x1_writers()) if strategy == "swap1x1" else None
        on_host = rng.random() < 0.5  # bwdconv's own kernels, else ATen's copies
        if may_crash_aten(call) and not survives_in_a_child(lambda: outcome(call, case)):
            crashing += 1
            continue
        expected = outcome(call, case)
        with bwdconv.enabled(scope), bwdconv.force_strategy(strategy, swap1x1_writer=writer), \
                (bwdconv.kernels_on_host() if on_host else contextlib.nullcontext()):
            got = outcome(call, case)
        found = differences(call, got, expected)
        if found and aten_changes_its_answer(call, case, expected):
            unstable += 1
            continue
        if found and aten_is_off(call, case, got, expected):
            aten_off += 1
            continue
        mismatches += [f"{call} forced {strategy}{f'[{writer}]' * bool(writer)}"
                       f"{' on the host target' * on_host}: {d}"
                       for d in found]
        modes.add(call.mode)
        raising += raised(expected)
    assert not mismatches, "\n".join(mismatches[:10])
    # The grid means something: every mode occurs, few calls crash aten,
    # find it changing its answer or off the float64 reference, some raise,
    # and strategies compute many of the results.
    assert modes == set(MODES)
    assert crashing + unstable + aten_off <= CASES // 100
    assert CASES // 50 <= raising <= CASES // 2
    served = bwdconv.served()
    assert sum(n for g in ("input", "forward") for s, n in served[g].items()
               if s != "aten") >= CASES // 10
    assert sum(n for s, n in served["weight"].items() if s != "aten") >= CASES // 50


COMPILED_CASES = 24


def test_random_compiled_calls_behave_as_compiled_without_bwdconv():
    """torch.compile traces the functional scope's Python path: the graph
    holds bwdconv's ops where it plans the call and PyTorch's otherwise. The
    compiled step gives what it gives without bwdconv: the same exception
    type and message, or results of the same dtype, shape and requires_grad, equal
    within the dtype's tolerance (their strides are the compiler's to
    choose). Valid calls only, in float32 and float64, as a graph cannot
    catch an error."""
    rng = random.Random(f"{SEED}-compiled")
    forced = [None, *bwdconv.strategies()]
    compared = 0
    bwdconv.reset_served()
    while compared < COMPILED_CASES:
        call = random_call(rng)
        call.mode = rng.choice(["grad", "no_grad"])
        call.dtype = rng.choice([torch.float32, torch.float64])
        call.input_layout = rng.choice(LAYOUTS)
        strategy, scope = rng.choice(forced), rng.choice(["functional", "aten"])
        if raised(outcome(call, compared)):
            continue
        call.compiled = True
        torch._dynamo.reset()
        expected = outcome(call, compared)
        torch._dynamo.reset()
        with bwdconv.enabled(scope), bwdconv.force_strategy(strategy):
            got = outcome(call, compared)
        found = differences(call, got, expected, strides=False)
        assert not found, (call, strategy, scope, found)
        compared += 1
    torch._dynamo.reset()
    assert sum(n for g in ("input", "forward") for s, n in bwdconv.served()[g].items()
               if s != "aten") >= 3
