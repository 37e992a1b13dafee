"""GPU checks (marker `gpu`; skipped without a CUDA or ROCm device): every
strategy forced against aten in fp32/fp16/bf16, NCHW and channels_last, odd
sizes, groups, dilation, 3D; splitk determinism; CUDA graph capture; the
caching allocator's peak as bwdconv.peak_memory."""

import pathlib
import sys

import pytest
import torch

import bwdconv
from conftest import aten_gradients

sys.path.append(str(pathlib.Path(__file__).resolve().parents[1] / "scripts"))  # after tools/
from bwdconv import _accuracy as accuracy  # noqa: E402  (the accuracy rule)

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA or ROCm GPU"),
]

STRATEGIES = bwdconv.strategies()
CASES = [  # (input size, weight size, stride, padding, dilation, groups)
    ((2, 16, 33, 31), (32, 16, 1, 1), [2, 2], [0, 0], [1, 1], 1),
    ((2, 16, 33, 31), (32, 4, 3, 3), [2, 2], [1, 1], [1, 1], 4),
    ((3, 8, 17, 19), (8, 8, 3, 2), [3, 2], [1, 0], [2, 1], 1),
    ((1, 4, 9, 10, 11), (8, 4, 3, 3, 3), [2, 2, 2], [1, 1, 1], [1, 1, 1], 1),
    ((4, 32, 56, 56), (64, 32, 3, 3), [1, 1], [1, 1], [1, 1], 1),
    # 64 phases: more than one interleave launch carries.
    ((1, 8, 21, 22, 23), (8, 8, 5, 5, 5), [4, 4, 4], [2, 1, 0], [1, 1, 1], 1),
]


def serves(strategy, case):
    plan = bwdconv.explain(list(case[0]), list(case[1]), *case[2:])
    return plan.serves(strategy, "input") or plan.serves(strategy, "weight")


def backward_call(entry, x, w, dy, case):
    """The gradient `entry` computes (its first), as a call."""
    s, p, d, groups = case[2:]
    if "input" in entry.gradients:
        return lambda: torch.ops.bwdconv.convolution_backward_input(
            dy, w, list(x.shape), s, p, d, groups)
    return lambda: torch.ops.bwdconv.convolution_backward_weight(
        dy, x, list(w.shape), s, p, d, groups)


def operands(case, dtype, channels_last):
    """x, w, dy in `dtype` on the GPU, and the float64 reference gradients
    (dx, dw) of those same rounded operands, on the GPU."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(case[0], generator=g, dtype=torch.float64).to(dtype)
    w = torch.randn(case[1], generator=g, dtype=torch.float64).to(dtype)
    y = torch.ops.aten.convolution(x.double(), w.double(), None, *case[2:5], False,
                                   [0] * len(case[2]), case[5])
    dy = torch.randn(y.shape, generator=g, dtype=torch.float64).to(dtype)
    ref = aten_gradients(dy.double(), x.double(), w.double(), *case[2:])
    x, w, dy = (t.cuda() for t in (x, w, dy))
    if channels_last:
        fmt = torch.channels_last if x.dim() == 4 else torch.channels_last_3d
        x, dy = x.to(memory_format=fmt), dy.to(memory_format=fmt)
    return x, w, dy, [r.cuda() for r in ref]


def error(t, ref):
    return (t.double() - ref).abs().max().item()


def accuracy_bounds(case, dtype, x, w, dy, atens, refs):
    """The accuracy rule's bound (bwdconv/_accuracy.py) for dx and dw:
    twice aten's error under the TF32 flags in effect, or what a correct
    (where TF32 is on, TF32) accumulation of their products may lose."""
    s, p, d, groups = case[2:]
    magnitudes = aten_gradients(dy.double().abs(), x.double().abs(), w.double().abs(), s, p, d,
                                groups)
    terms = list(accuracy.gradient_terms(dy.shape, case[1], groups))
    rounding = accuracy.operand_roundoff(dtype, x.device)
    return [b for _, b in accuracy.bounds(dtype, atens, refs, magnitudes, terms, rounding)]


def expect_forced_within_rule(strategy, case, dtype, channels_last, device=None):
    """Forced `strategy`'s dx and dw for `case` on `device` (the current GPU
    when None), on that device and within the accuracy rule."""
    x, w, dy, refs = operands(case, dtype, channels_last)
    if device is not None:
        x, w, dy, refs = x.to(device), w.to(device), dy.to(device), [r.to(device) for r in refs]
    s, p, d, groups = case[2:]
    atens = aten_gradients(dy, x, w, s, p, d, groups)
    with bwdconv.force_strategy(strategy):
        gx = torch.ops.bwdconv.convolution_backward_input(dy, w, list(x.shape), s, p, d, groups)
        gw = torch.ops.bwdconv.convolution_backward_weight(dy, x, list(w.shape), s, p, d, groups)
    torch.cuda.synchronize(x.device)
    bounds = accuracy_bounds(case, dtype, x, w, dy, atens, refs)
    for name, ours, ref, bound in (("dx", gx, refs[0], bounds[0]), ("dw", gw, refs[1], bounds[1])):
        assert ours.device == x.device and error(ours, ref) <= bound, \
            (name, strategy, dtype, channels_last, case)


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("channels_last", [False, True])
def test_forced_strategy_accuracy(strategy, dtype, channels_last):
    """The accuracy rule (bwdconv/_accuracy.py): error against float64 at
    most twice aten's error in the same dtype under the same TF32 flags, or
    the (TF32) accumulation bound."""
    served = [case for case in CASES if serves(strategy, case)]
    for case in served:
        expect_forced_within_rule(strategy, case, dtype, channels_last)
    assert served


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_tensors_on_a_gpu_that_is_not_the_current_one(strategy):
    """Operands on the second GPU while the first is current: the strategy's
    kernels run on the operands' device (bwdconv sets it for each launch, as
    PyTorch sets none for a custom op), within the accuracy rule."""
    assert torch.cuda.current_device() == 0
    served = [case for case in CASES if serves(strategy, case)]
    for case in served:
        expect_forced_within_rule(strategy, case, torch.float16, False, torch.device("cuda", 1))
    assert served


@pytest.mark.parametrize("writer", ["fused", "in_place"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_swap1x1_writers_on_gpu(writer, dtype):
    """Both ways swap1x1 writes a channels_last dx, under the accuracy rule,
    and each records into a CUDA graph that replays to the same bits."""
    case = ((2, 16, 34, 31), (32, 16, 1, 1), [2, 3], [0, 0], [1, 1], 1)  # 34 = 17 * 2: uniform
    x, w, dy, (ref_x, ref_w) = operands(case, dtype, True)
    s, p, d, groups = case[2:]
    aten_x, aten_w = aten_gradients(dy, x, w, s, p, d, groups)

    def call():
        return torch.ops.bwdconv.convolution_backward_input(dy, w, list(x.shape), s, p, d, groups)

    with bwdconv.force_strategy("swap1x1", swap1x1_writer=writer):
        gx = call()
        graph = torch.cuda.CUDAGraph()
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            expected = call()  # warm up outside the capture, on the capturing stream
        torch.cuda.current_stream().wait_stream(stream)
        with torch.cuda.graph(graph):
            captured = call()
    graph.replay()
    torch.cuda.synchronize()
    assert gx.is_contiguous(memory_format=torch.channels_last)
    bound = accuracy_bounds(case, dtype, x, w, dy, [aten_x, aten_w], [ref_x, ref_w])[0]
    assert error(gx, ref_x) <= bound
    assert torch.equal(captured, expected)


def expect_swap1x1_past_two_to_the_31(writer):
    """swap1x1 with `writer` on a dx of more than 2^31 elements (1x1 stride 2,
    NCHW) against its definition: dx[:, :, ::2, ::2] = W^T dy and zeros in
    every other position."""
    h, w = 32768, 32770
    dy = torch.randn(1, 2, h // 2, (w + 1) // 2, device="cuda", dtype=torch.bfloat16)
    weight = torch.randn(2, 2, 1, 1, device="cuda", dtype=torch.bfloat16)
    with bwdconv.force_strategy("swap1x1", swap1x1_writer=writer, strict=True):
        dx = torch.ops.bwdconv.convolution_backward_input(dy, weight, [1, 2, h, w], [2, 2], [0, 0],
                                                          [1, 1], 1)
    assert dx.numel() > 2**31
    slots = torch.einsum("nkhw,kc->nchw", dy.float(), weight[:, :, 0, 0].float())
    torch.testing.assert_close(dx[:, :, ::2, ::2].float(), slots, rtol=1e-2, atol=1e-2)
    assert dx[:, :, 1::2, :].abs().max().item() == 0
    assert dx[:, :, ::2, 1::2].abs().max().item() == 0


def test_interleave_beyond_two_to_the_31_elements():
    """A dx of more than 2^31 elements takes the kernels' 64-bit index path:
    swap1x1's fused writer (the interleave kernel)."""
    expect_swap1x1_past_two_to_the_31("fused")


@pytest.mark.parametrize("entry", [e for e in bwdconv.registry() if e.deterministic["gpu"]],
                         ids=lambda e: e.name)
def test_deterministic_strategies_are_deterministic_on_gpu(entry):
    """What the registry calls deterministic on a GPU gives the same bits on every
    call under PyTorch's deterministic algorithms."""
    case = next(c for c in CASES[4:] + CASES[:4] if serves(entry.name, c))
    x, w, dy, _ = operands(case, torch.bfloat16, False)
    call = backward_call(entry, x, w, dy, case)
    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        with bwdconv.force_strategy(entry.name):
            runs = [call() for _ in range(3)]
    finally:
        torch.use_deterministic_algorithms(before)
    assert all(torch.equal(r, runs[0]) for r in runs)


@pytest.mark.parametrize("entry", [e for e in bwdconv.registry() if e.kernel], ids=lambda e: e.name)
def test_forced_kernels_are_cuda_graph_capturable(entry):
    """Each strategy's kernels record into a CUDA graph (no host synchronisation,
    no allocation outside the caching allocator) and replay to the same bits."""
    case = next(c for c in reversed(CASES[:2]) if serves(entry.name, c))
    x, w, dy, _ = operands(case, torch.float32, False)
    call = backward_call(entry, x, w, dy, case)
    with bwdconv.force_strategy(entry.name):
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            expected = [call() for _ in range(2)][-1]  # warm up outside the capture
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            captured = call()
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(captured, expected)


def test_backward_is_cuda_graph_capturable():
    model = torch.nn.Sequential(torch.nn.Conv2d(8, 16, 3, stride=2, padding=1),
                                torch.nn.Conv2d(16, 16, 1, stride=2)).cuda()
    x = torch.randn(4, 8, 32, 32, device="cuda", requires_grad=True)
    bwdconv.enable()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):  # warm up (plans, allocator) outside the capture
            model.zero_grad(set_to_none=False)
            model(x).sum().backward()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    model.zero_grad(set_to_none=False)
    with torch.cuda.graph(graph):
        model(x).sum().backward()
    graph.replay()
    torch.cuda.synchronize()
    captured = [p.grad.clone() for p in model.parameters()]
    bwdconv.disable()
    model.zero_grad(set_to_none=True)
    model(x).sum().backward()
    for a, b in zip(captured, [p.grad for p in model.parameters()]):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("autocast", [False, True])
def test_resnet18_training_step_on_gpu(autocast):
    """ResNet-18 gradients with bwdconv enabled equal aten's: fp32, and bf16 under
    autocast (where both sides round differently, so the bound is looser)."""
    torchvision = pytest.importorskip("torchvision")
    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=10).cuda()
    x = torch.randn(8, 3, 64, 64, device="cuda")
    target = torch.arange(8, device="cuda") % 10
    state = {k: v.clone() for k, v in model.state_dict().items()}

    def gradients():
        model.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
            loss = torch.nn.functional.cross_entropy(model(x), target)
        loss.backward()
        return {n: p.grad.clone() for n, p in model.named_parameters()}

    reference = gradients()
    model.load_state_dict(state)
    with bwdconv.enabled():
        ours = gradients()
    largest = max(g.abs().max().item() for g in reference.values())
    rtol, scale = (5e-2, 1e-2) if autocast else (1e-3, 1e-4)
    for name in reference:
        torch.testing.assert_close(ours[name], reference[name], rtol=rtol, atol=scale * largest,
                                   msg=lambda m: f"{name}: {m}")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_autotuning_on_gpu_verifies_and_times_with_events(dtype, tmp_path, monkeypatch):
    """Tuning on the GPU, whatever wins: a corrupted strategy is excluded by
    its verification; every other candidate that can serve is either timed
    or excluded with a reason, and none is both; the timings come from CUDA
    events; the choice is one of the timed and, where not aten, faster than
    aten in its times; the gradient returned is within the accuracy rule
    against float64 (bwdconv/_accuracy.py)."""
    from bwdconv import _cache, _tune

    events = {"timed": 0}

    class CountingEvent(torch.cuda.Event):
        def elapsed_time(self, end):
            events["timed"] += 1
            return super().elapsed_time(end)

    monkeypatch.setattr(torch.cuda, "Event", CountingEvent)
    monkeypatch.setenv("BWDCONV_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(_tune, "KEY_SECONDS", 0.2)
    _tune._state.cache = _cache.DecisionCache()
    bwdconv._explain._C.forget_decisions()
    case = CASES[1]
    x, w, dy, ref = operands(case, dtype, False)
    s, p, d, groups = case[2:]
    expected, expected_w = aten_gradients(dy, x, w, s, p, d, groups)
    bwdconv._explain._C._testing.set_faults(corrupted="phase")
    try:
        with bwdconv.autotuning(), pytest.warns(RuntimeWarning, match="phase disagrees"):
            result = torch.ops.bwdconv.convolution_backward_input(dy, w, list(x.shape), s, p, d,
                                                                  groups)
    finally:
        bwdconv._explain._C._testing.set_faults(corrupted=None)
        bwdconv._explain._C.forget_decisions()
    # The gradient returned: the accuracy rule against float64.
    bound = accuracy_bounds(case, dtype, x, w, dy, [expected, expected_w], ref)[0]
    assert error(result, ref[0]) <= bound, (error(result, ref[0]), bound)
    (key, entry), = bwdconv.decisions().items()
    assert key.startswith(("cuda ", "hip "))
    decided = entry["gradients"]["input"]
    times, excluded = decided["times"], decided["excluded"]
    # Verification: the corrupted strategy excluded for disagreeing, never timed or chosen.
    assert "disagrees" in excluded["phase"] and "phase" not in times
    assert decided["choice"] != "phase"
    # Every other candidate that can serve is timed or excluded (with a reason), not both.
    plan = bwdconv.explain(list(case[0]), list(case[1]), *case[2:])
    others = {s for s in bwdconv.strategies("input") if plan.serves(s, "input") and s != "phase"}
    assert len(others) >= 3
    accounted = {label.split("[")[0] for label in set(times) | set(excluded)}
    assert others <= accounted, others - accounted
    assert not set(times) & set(excluded)
    assert all(isinstance(why, str) and why for why in excluded.values())
    # Timing: aten always among the timed, every sample from CUDA events.
    assert "aten" in times
    assert events["timed"] >= sum(t["n"] for t in times.values()) > 0
    # The choice is one of the timed; where not aten, faster than aten.
    label = decided["choice"] + (f"[{decided['writer']}]" if decided.get("writer") else "")
    assert label in times or decided["choice"] in times
    if decided["choice"] != "aten":
        chosen = times.get(label) or times[decided["choice"]]
        assert chosen["median_us"] < times["aten"]["median_us"]
        assert decided["speedup"] > 1


def test_no_tuning_during_graph_capture(tmp_path, monkeypatch):
    from bwdconv import _cache, _tune

    monkeypatch.setenv("BWDCONV_CACHE_DIR", str(tmp_path))
    _tune._state.cache = _cache.DecisionCache()
    bwdconv._explain._C.forget_decisions()
    case = CASES[1]
    x, w, dy, _ = operands(case, torch.float32, False)
    s, p, d, groups = case[2:]
    with bwdconv.autotuning():
        graph = torch.cuda.CUDAGraph()
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            torch.ops.aten.convolution_backward(dy, x, w, None, s, p, d, False, [0, 0], groups,
                                                [True, False, False])  # warm up aten
        torch.cuda.current_stream().wait_stream(stream)
        with torch.cuda.graph(graph):
            torch.ops.bwdconv.convolution_backward_input(dy, w, list(x.shape), s, p, d, groups)
    bwdconv._explain._C.forget_decisions()
    assert bwdconv.decisions() == {}


def test_peak_memory_on_gpu_is_the_caching_allocators_peak():
    # 4 MiB blocks: a multiple of the caching allocator's 512-byte rounding.
    with bwdconv.peak_memory("cuda") as outer:
        kept = torch.empty(2**20, device="cuda")
        with bwdconv.peak_memory("cuda") as inner:
            torch.empty(2 * 2**20, device="cuda")  # freed at once
        del kept
    assert (inner.bytes, outer.bytes) == (8 * 2**20, 12 * 2**20)


def test_kernel_benchmark_times_relayouts_transposes_and_torchs_copy():
    """python -m bwdconv.bench.kernels on one NCHW line: a row for each
    strategy's kernels, relayout's transposes among them, and one for PyTorch's
    copy of the same tensors, each with a time and a bandwidth; the scatter
    and interleave rows with their time on the dense walk too."""
    from bwdconv.bench.driver import parse_line
    from bwdconv.bench.kernels import measure
    line = parse_line("convbfp16 -n 2 -c 64 -H 32 -W 32 -k 32 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 -F 2")
    rows = measure(line, 3, 1000.0)
    by_strategy = {row[1]: row for row in rows}
    assert by_strategy["relayout"][2] == "relayout"
    assert by_strategy["torch contiguous()"][2] == "copy"
    assert all(row[3] > 0 and row[4] > 0 for row in rows), rows
    assert all(row[6] > 0 for row in rows if row[2] in ("interleave", "scatter")), rows
