"""swap1x1's ways of writing dx, forced: `fused` (one interleave pass from
the small GEMM result) and `in_place` (a batched GEMM into dx's strided slots,
then only the holes zeroed), against aten and float64 math."""

import os
import random
import re
import subprocess
import sys

import pytest
import torch

import bwdconv
from conftest import aten_gradients

WRITERS = ["fused", "in_place"]


def in_place_refusal(case, channels_last=True, device="cpu"):
    x_size, w_size, s, p = case
    plan = bwdconv.explain(list(x_size), list(w_size), s, p, channels_last=channels_last,
                           device=device).to_dict()
    return plan["swap1x1"]["refusals"]["in_place"]


def random_in_place_case(rng):
    """A 2-D convolution, stride > 1, a 1x1 filter or (half the time) one
    within the stride (kernel = stride among them), whose slots in
    channels_last dx form one uniformly strided batch: batch 1, or input
    height = output height * stride; grad_output unambiguously channels_last."""
    while True:
        s = [rng.randint(2, 4), rng.randint(1, 4)]
        taps = [rng.randint(1, si) for si in s] if rng.random() < 0.5 else [1, 1]
        n = rng.randint(1, 3)
        out_h, out_w = rng.randint(1, 5), rng.randint(1, 6)
        h = out_h * s[0] if n > 1 or rng.random() < 0.5 else out_h * s[0] - rng.randint(0, s[0] - 1)
        w = out_w * s[1] if taps[1] > 1 else rng.randint(1, 12)
        c, k = rng.randint(2, 6), rng.randint(2, 6)
        case = ((n, c, h, w), (k, c, *taps), s, [0, 0])
        if h < taps[0]:
            continue
        out_w = (w - taps[1]) // s[1] + 1
        # One output position, or one channel, leaves the layout of grad_output ambiguous.
        if out_h * out_w > 1 and in_place_refusal(case) is None:
            return case


def operands(case, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(case[0], generator=g, dtype=torch.float64)
    w = torch.randn(case[1], generator=g, dtype=torch.float64)
    y = torch.ops.aten.convolution(x, w, None, case[2], case[3], [1, 1], False, [0, 0], 1)
    dy = torch.randn(y.shape, generator=g, dtype=torch.float64)
    return x, w, dy


def forced_grad_input(writer, dy, w, x_size, case, strict=False):
    with bwdconv.force_strategy("swap1x1", swap1x1_writer=writer, strict=strict):
        return torch.ops.bwdconv.convolution_backward_input(dy, w, list(x_size), case[2], case[3],
                                                            [1, 1], 1)


def channels_last(t):
    return t.contiguous(memory_format=torch.channels_last)


@pytest.mark.parametrize("writer", WRITERS)
def test_both_writers_match_aten_in_float64(writer):
    rng = random.Random(20261123)
    with_taps = 0
    for trial in range(150):
        case = random_in_place_case(rng)
        with_taps += case[1][2:] != (1, 1)
        x, w, dy = operands(case, torch.float64, trial)
        x, dy = channels_last(x), channels_last(dy)
        expected = aten_gradients(dy, x, w, case[2], case[3], [1, 1], 1)[0]
        ours = forced_grad_input(writer, dy, w, x.shape, case)
        meta = aten_gradients(dy.to("meta"), x.to("meta"), w.to("meta"), case[2], case[3],
                              [1, 1], 1)[0]
        assert ours.stride() == meta.stride(), case
        torch.testing.assert_close(ours, expected, rtol=1e-12, atol=1e-12,
                                   msg=f"trial {trial} {case}")
    assert with_taps >= 40


@pytest.mark.parametrize("writer", WRITERS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_both_writers_lower_precision(writer, dtype):
    """Error against float64 math at most twice aten's in the same dtype."""
    case = ((2, 16, 12, 10), (24, 16, 1, 1), [2, 2], [0, 0])
    assert in_place_refusal(case) is None
    x64, w64, dy64 = operands(case, torch.float64, 0)
    ref = aten_gradients(dy64, x64, w64, case[2], case[3], [1, 1], 1)[0]
    x, w, dy = channels_last(x64.to(dtype)), w64.to(dtype), channels_last(dy64.to(dtype))
    theirs = aten_gradients(dy, x, w, case[2], case[3], [1, 1], 1)[0]
    ours = forced_grad_input(writer, dy, w, x.shape, case)
    assert ours.dtype == dtype and ours.is_contiguous(memory_format=torch.channels_last)
    error = lambda t: (t.double() - ref).abs().max().item()  # noqa: E731
    assert error(ours) <= 2 * error(theirs) + 1e-5 * ref.abs().max().item()


@pytest.mark.parametrize("writer", WRITERS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_kernel_equal_to_stride_transposed_forward(writer, dtype):
    """U-Net's ConvTranspose2d k2 s2 in channels_last, swap1x1 forced with each
    writer: in_place writes the output with one batched GEMM per kernel row
    and no zeroing pass (kernel = stride leaves no holes). Against float64
    math, at most twice aten's error plus 1e-5 of the reference's magnitude."""
    g = torch.Generator().manual_seed(5)
    x64 = torch.randn(2, 16, 6, 7, generator=g, dtype=torch.float64)
    w64 = torch.randn(16, 8, 2, 2, generator=g, dtype=torch.float64)
    reference = torch.nn.functional.conv_transpose2d(x64, w64, stride=2)
    x, w = channels_last(x64.to(dtype)), w64.to(dtype)
    theirs = torch.nn.functional.conv_transpose2d(x, w, stride=2)
    bwdconv.enable()
    bwdconv.reset_served()
    bwdconv._library._C.start_kernel_recording()
    with bwdconv.force_strategy("swap1x1", swap1x1_writer=writer, strict=True), \
            bwdconv.kernels_on_host():
        ours = torch.nn.functional.conv_transpose2d(x, w, stride=2)
    launched = [launch["kernel"] for launch in
                bwdconv._library._C.stop_kernel_recording()["launches"]]
    assert launched == ([] if writer == "in_place" else ["interleave"])
    assert bwdconv.served()["forward"]["swap1x1"] == 1
    assert ours.is_contiguous(memory_format=torch.channels_last) and ours.dtype == dtype
    error = lambda t: (t.double() - reference).abs().max().item()  # noqa: E731
    assert error(ours) <= 2 * error(theirs) + 1e-5 * reference.abs().max().item()
    assert in_place_refusal(((2, 8, 12, 14), (16, 8, 2, 2), [2, 2], [0, 0])) is None


def test_in_place_with_dilated_outer_taps():
    """Taps of a dilated outer dim (k2 d2 within stride 4) land 2 rows apart."""
    case = ((2, 4, 12, 6), (5, 4, 2, 3), [4, 3], [0, 0])
    x, w, dy = operands(case, torch.float64, 3)
    x, dy = channels_last(x), channels_last(dy)
    dilation = [2, 1]
    expected = torch.ops.aten.convolution_backward(
        dy, x, w, None, case[2], case[3], dilation, False, [0, 0], 1, [True, False, False])[0]
    with bwdconv.force_strategy("swap1x1", swap1x1_writer="in_place", strict=True):
        ours = torch.ops.bwdconv.convolution_backward_input(dy, w, list(x.shape), case[2],
                                                            case[3], dilation, 1)
    torch.testing.assert_close(ours, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("case, layout, reason", [
    (((1, 4, 8, 8), (4, 4, 1, 1), [2, 2], [1, 1]), True, "padding"),
    (((2, 4, 9, 8), (4, 4, 1, 1), [2, 2], [0, 0]), True, "uniformly strided"),
    (((2, 4, 8, 8), (4, 4, 1, 1), [2, 2], [0, 0]), False, "not channels_last"),
    (((1, 4, 9, 8), (4, 4, 2, 2), [2, 2], [0, 0]), True, "taps' slots end before dx"),
])
def test_in_place_forced_where_it_cannot_serve_gives_way_unless_strict(case, layout, reason):
    assert reason in in_place_refusal(case, channels_last=layout)
    x, w, dy = operands(case, torch.float64, 0)
    if layout:
        dy = channels_last(dy)
    expected = aten_gradients(dy, x, w, case[2], case[3], [1, 1], 1)[0]
    # Not strict: the planner's writer (fused) serves, and explain says why.
    torch.testing.assert_close(forced_grad_input("in_place", dy, w, x.shape, case), expected)
    with bwdconv.force_strategy("swap1x1", swap1x1_writer="in_place"):
        plan = bwdconv.explain(x if not layout else channels_last(x), w, case[2], case[3])
    assert plan.input_strategy == "swap1x1"
    assert plan.to_dict()["swap1x1"]["writer"] == "fused"
    assert re.search(f"swap1x1 writes dx: fused \\(forced in_place cannot serve it: .*{reason}",
                     str(plan))
    # Strict: backward raises with the reason, as explain warns.
    with pytest.raises(ValueError, match=reason):
        forced_grad_input("in_place", dy, w, x.shape, case, strict=True)
    torch.testing.assert_close(forced_grad_input("fused", dy, w, x.shape, case), expected)
    assert bwdconv._explain._C.forcing() == (None, None, False)


def test_bfloat16_nchw_1x1_stride_2_trains_with_in_place_forced():
    """CPU bfloat16 NCHW 1x1 stride 2: in_place cannot serve; forcing it trains anyway."""
    m = torch.nn.Conv2d(8, 16, 1, stride=2).bfloat16()
    x = torch.randn(2, 8, 8, 8, dtype=torch.bfloat16, requires_grad=True)
    bwdconv.enable()
    bwdconv.reset_served()
    dy = torch.randn(2, 16, 4, 4, dtype=torch.bfloat16)
    with bwdconv.force_strategy("swap1x1", swap1x1_writer="in_place"):
        m(x).backward(dy)
    assert bwdconv.served()["input"]["swap1x1"] == 1
    expected = aten_gradients(dy.double(), x.double(), m.weight.double(), [2, 2], [0, 0],
                              [1, 1], 1)[0]
    torch.testing.assert_close(x.grad.double(), expected, rtol=2e-2, atol=2e-2)


def test_a_forced_writer_binds_only_where_swap1x1_computes_dx():
    """in_place forced beside another strategy, on a shape it cannot serve, is ignored."""
    case = ((1, 4, 8, 8), (4, 4, 1, 1), [2, 2], [1, 1])
    x, w, dy = operands(case, torch.float64, 0)
    bwdconv.reset_served()
    with bwdconv.force_strategy("phase", swap1x1_writer="in_place"):
        ours = torch.ops.bwdconv.convolution_backward_input(dy, w, list(x.shape), [2, 2], [1, 1],
                                                            [1, 1], 1)
    torch.testing.assert_close(ours, aten_gradients(dy, x, w, [2, 2], [1, 1], [1, 1], 1)[0])
    assert bwdconv.served()["input"] == {**{s: 0 for s in bwdconv.strategies()}, "phase": 1}


def test_unknown_writer_raises_and_keeps_the_previous_forcing():
    with bwdconv.force_strategy("phase", swap1x1_writer="fused"):
        with pytest.raises(ValueError, match="swap1x1_writer='inplace': expected one of fused"):
            with bwdconv.force_strategy("swap1x1", swap1x1_writer="inplace"):
                pass
        with pytest.raises(ValueError, match="name='fastest': expected one of aten"):
            with bwdconv.force_strategy("fastest", swap1x1_writer="in_place"):
                pass
        assert bwdconv._explain._C.forcing() == ("phase", "fused", False)
    assert bwdconv._explain._C.forcing() == (None, None, False)


def test_explain_names_the_writer_per_device():
    sizes = ([8, 64, 56, 56], [128, 64, 1, 1], 2, 0)
    gpu = bwdconv.explain(*sizes, channels_last=True, device="cuda")
    assert gpu.to_dict()["swap1x1"]["writer"] == "in_place"
    assert "swap1x1 writes dx: in_place" in str(gpu)
    cpu = bwdconv.explain(*sizes, channels_last=True).to_dict()["swap1x1"]
    assert cpu["writer"] == "fused" and cpu["refusals"]["in_place"] is None
    nchw = bwdconv.explain(*sizes, device="cuda").to_dict()["swap1x1"]
    assert nchw["writer"] == "fused" and "not channels_last" in nchw["refusals"]["in_place"]
    assert "swap1x1" not in bwdconv.explain([8, 64, 56, 56], [128, 64, 3, 3], 2, 1).to_dict()


def test_environment_variable_forces_a_writer():
    code = ("import bwdconv; print(bwdconv._explain._C.forcing()[1]); "
            "print(bwdconv.explain([1, 4, 8, 8], [4, 4, 1, 1], 2, channels_last=True,"
            " device='cuda').to_dict()['swap1x1']['writer'])")
    env = dict(os.environ, BWDCONV_STRATEGY="swap1x1", BWDCONV_SWAP1X1_WRITER="fused")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True)
    assert out.stdout.split() == ["fused", "fused"]
    env["BWDCONV_SWAP1X1_WRITER"] = "scattered"
    bad = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert bad.returncode != 0 and "BWDCONV_SWAP1X1_WRITER='scattered': expected one of fused" in bad.stderr


def test_the_tuner_and_the_bench_time_every_writer_that_can_serve():
    sizes = ([8, 128, 64, 64], [64, 128, 2, 2], 2, 0)
    nchw = bwdconv.explain(*sizes, dtype=torch.bfloat16, device="cuda").to_dict()["swap1x1"]
    assert nchw["timed"] == ["fused"] and nchw["writer"] == "fused"
    assert "not channels_last" in nchw["refusals"]["in_place"]
    rows = bwdconv.explain(*sizes, dtype=torch.bfloat16, device="cuda",
                           channels_last=True).to_dict()["swap1x1"]
    assert rows["timed"] == ["fused", "in_place"] and rows["refusals"]["in_place"] is None
    text = str(bwdconv.explain(*sizes, dtype=torch.float32, device="cuda"))
    assert "    in_place: refused: dx is not channels_last" in text
    assert bwdconv.swap1x1_writers() == ["fused", "in_place"]
