"""The csrc/hip kernels themselves, run on the host grid for CPU tensors
(bwdconv.kernels_on_host): scatter, the interleave pass of phase,
phase_stacked and swap1x1 (its fused and in_place writers), through the
ops, on random 1-3D shapes with groups, dilation and padding, in every
dtype, NCHW and channels_last, with more phases than one launch carries, on
stride-2 NCHW rows and channels_last rows of a few channels, and scatter
also with its 64-bit element offsets forced on.

Data movement copies bits, so dx from the kernels must equal, bit for bit and
stride for stride, dx from the CPU's ATen writers (strided copies), and both
must meet the accuracy rule against aten."""

import contextlib
import random

import pytest
import torch

import bwdconv
from conftest import aten_gradients
from test_strategies import max_error, operands, random_case

SEED = 20261123
DTYPES = (torch.float64, torch.float32, torch.float16, torch.bfloat16)
# 1x1 shapes whose channels_last dx swap1x1's in_place writer can fill (no
# padding, one group, slots forming one strided batch), rare among random ones.
IN_PLACE_CASES = [((2, 8, 10, 12), (8, 8, 1, 1), [2, 2], [0, 0], [1, 1], 1),
                  ((1, 4, 9, 11), (6, 4, 1, 1), [2, 3], [0, 0], [1, 1], 1),
                  ((2, 4, 3, 5, 8), (4, 4, 1, 1, 1), [1, 1, 2], [0, 0, 0], [1, 1, 1], 1)]
# More phases than one interleave launch carries (32): 36, 40 and 64.
MANY_PHASE_CASES = [((1, 2, 13, 14), (2, 2, 3, 3), [6, 6], [1, 1], [1, 1], 1),
                    ((2, 3, 90), (4, 3, 5), [40], [2], [1], 1),
                    ((1, 2, 9, 9, 10), (2, 2, 2, 2, 2), [4, 4, 4], [0, 1, 0], [1, 1, 1], 1),
                    ((1, 4, 12, 16), (4, 4, 1, 1), [6, 8], [0, 0], [1, 1], 1)]
# NCHW shapes whose dx and scatter buffer rows have stride 2 (W of 69 to 201).
STRIDE_TWO_ROW_CASES = [((2, 3, 10, 70), (4, 3, 1, 1), [2, 2], [0, 0], [1, 1], 1),
                ((1, 4, 9, 81), (4, 4, 3, 3), [2, 2], [1, 1], [1, 1], 1),
                ((2, 3, 201), (5, 3, 3), [2], [1], [1], 1),
                ((1, 4, 5, 6, 90), (4, 2, 1, 3, 3), [1, 2, 2], [0, 1, 1], [1, 1, 1], 2)]
# channels_last shapes of 2 and 3 channels: dx rows shorter than a chunk
# beside a stride-2 W.
FEW_CHANNEL_CASES = [((2, 3, 12, 40), (4, 3, 3, 3), [2, 2], [1, 1], [1, 1], 1),
                ((1, 2, 6, 9, 50), (3, 2, 1, 3, 3), [1, 1, 2], [0, 1, 1], [1, 1, 1], 1),
                ((1, 3, 7, 60), (2, 3, 3, 3), [2, 2], [1, 1], [1, 1], 1)]
# Short NCHW rows of a padded stride-1 dim beside a strided one, each found
# wrong on an H200 (benchmarks/results/gpu-2026-11-27-h200 and after) in its 2-
# or 4-byte dtype: a walk since removed read the row's slots from 0, not
# from its padding. A transposed call is the input gradient of the convolution it
# transposes (its output as x, its input as dy).
PADDED_ROW_CASES = [
    (((2, 19, 23, 2), (6, 19, 4, 4), [2, 1], [0, 1], [1, 1], 1), torch.float32),
    (((6, 68, 3, 23, 2), (72, 17, 7, 5, 1), [2, 2, 1], [2, 2, 2], [1, 1, 1], 4), torch.bfloat16),
    (((2, 4, 27, 6), (44, 1, 1, 1), [2, 1], [0, 3], [2, 1], 4), torch.bfloat16),
    (((5, 12, 55, 3), (9, 12, 7, 4), [2, 1], [2, 1], [1, 1], 1), torch.float16),
    (((5, 19, 31, 2), (22, 19, 1, 4), [2, 1], [0, 3], [1, 2], 1), torch.float16),
    (((3, 24, 12, 6, 6), (2, 12, 3, 3, 5), [4, 2, 1], [2, 1, 3], [2, 1, 1], 2), torch.bfloat16),
    (((3, 1, 33, 2), (16, 1, 2, 5), [2, 1], [1, 3], [2, 1], 1), torch.float32),
    (((4, 14, 79, 3), (5, 14, 7, 1), [2, 1], [2, 2], [1, 2], 1), torch.float32),
    (((1, 30, 15, 3), (20, 15, 3, 1), [2, 1], [1, 3], [1, 1], 2), torch.float32),
    (((2, 21, 35, 25, 2), (9, 21, 3, 7, 1), [4, 2, 1], [0, 0, 1], [1, 1, 2], 1), torch.bfloat16),
    (((6, 11, 69, 6), (1, 11, 7, 1), [2, 1], [3, 1], [1, 1], 1), torch.float16),
    (((2, 1, 13, 4), (3, 1, 1, 1), [2, 1], [0, 2], [1, 1], 1), torch.float16),
]
# Filters within the stride in 16-bit dtypes (one group): U-Net's kernel =
# stride, 16 taps, a 3-D kernel = stride, a padded 1x1 (holes and cropping),
# taps dilated apart, and output padding past the taps' reach.
WITHIN_STRIDE_CASES = [((2, 40, 18, 16), (24, 40, 2, 2), [2, 2], [0, 0], [1, 1], 1),
                       ((1, 6, 16, 12), (9, 6, 4, 4), [4, 4], [0, 0], [1, 1], 1),
                       ((1, 4, 6, 8, 4), (5, 4, 2, 2, 2), [2, 2, 2], [0, 0, 0], [1, 1, 1], 1),
                       ((2, 5, 11, 9), (7, 5, 1, 1), [2, 3], [1, 0], [1, 1], 1),
                       ((1, 3, 13, 10), (4, 3, 2, 1), [4, 2], [1, 0], [3, 1], 1),
                       ((2, 6, 9, 11), (3, 6, 3, 2), [3, 2], [0, 0], [1, 1], 1)]
WITHIN_STRIDE_DTYPES = (torch.float16, torch.bfloat16)
# (strategy, swap1x1 writer) for every input-gradient strategy that launches a
# kernel, swap1x1 once per writer.
INPUT_FORCINGS = [(e.name, writer) for e in bwdconv.registry()
                  if "input" in e.gradients and e.kernel
                  for writer in (bwdconv.swap1x1_writers() if e.name == "swap1x1" else (None,))]



@contextlib.contextmanager
def wide_offsets():
    """Inside the block the kernels use their 64-bit element offsets on any shape."""
    bwdconv._library._C._testing.set_wide_offsets(True)
    try:
        yield
    finally:
        bwdconv._library._C._testing.set_wide_offsets(False)


def channels_last(t):
    return t.contiguous(memory_format=torch.channels_last if t.dim() == 4
                        else torch.channels_last_3d)


def case_operands(case, trial, dtype, last):
    """x, w, dy in `dtype` (dy in channels_last when `last`), and their float64 originals."""
    x64, w64 = operands(case, seed=trial)
    _, _, s, p, d, groups = case
    torch.manual_seed(trial)
    dy64 = torch.randn_like(torch.ops.aten.convolution(x64, w64, None, s, p, d, False,
                                                       [0] * len(s), groups))
    x, w, dy = x64.to(dtype), w64.to(dtype), dy64.to(dtype)
    if last and dy.dim() > 3:
        x, dy = channels_last(x), channels_last(dy)
    return (x, w, dy), (x64, w64, dy64)


def input_gradient(case, dy, w, x, forcing):
    _, _, s, p, d, groups = case
    strategy, writer = forcing
    with bwdconv.force_strategy(strategy, swap1x1_writer=writer):
        return torch.ops.bwdconv.convolution_backward_input(dy, w, list(x.shape), s, p, d,
                                                            groups)


def assert_accurate(ours, theirs, reference, where):
    """The accuracy rule: at most twice aten's error against float64 math (in
    float64: within 1e-10), plus 1e-5 of the reference's magnitude."""
    if ours.dtype == torch.float64:
        torch.testing.assert_close(ours, reference, rtol=1e-10, atol=1e-10, msg=where)
        return
    bound = 2 * max_error(theirs, reference) + 1e-5 * reference.abs().max().item()
    assert max_error(ours, reference) <= bound, where


def has_padded_stride_one_row(case):
    """Whether the last dim has stride 1 and padding at or past the kernel's extent."""
    _, w_size, s, p, d, _ = case
    return s[-1] == 1 and p[-1] >= d[-1] * (w_size[-1] - 1) + 1


def input_cases():
    """(trial, case, dtype, channels_last) for random shapes (a third of them
    with a padded stride-1 last dim, in every dtype and both layouts), the
    in_place shapes, the many-phase shapes, the stride-2 row shapes (NCHW),
    the few-channel shapes (channels_last), the padded-row shapes (NCHW, each in
    the dtype it was found wrong in) and the 16-bit shapes within the stride."""
    rng = random.Random(SEED)
    cases = [random_case(rng, within_stride=trial % 3 == 0, padded_stride_one=trial % 3 == 2)
             for trial in range(96)]
    cases += IN_PLACE_CASES + MANY_PHASE_CASES + STRIDE_TWO_ROW_CASES + FEW_CHANNEL_CASES
    # dtypes cycle with period 4 and layouts with period 2 over trials, so
    # every third trial (the padded ones) meets every dtype in both layouts
    drawn = [(trial, case, DTYPES[trial % 4],
              (trial // 4 % 2 == 1 or case in IN_PLACE_CASES + FEW_CHANNEL_CASES)
              and case not in STRIDE_TWO_ROW_CASES)
             for trial, case in enumerate(cases)]
    drawn += [(len(drawn) + i, case, dtype, False)
              for i, (case, dtype) in enumerate(PADDED_ROW_CASES)]
    return drawn + [(len(drawn) + i, case, WITHIN_STRIDE_DTYPES[i % 2], i % 3 == 1)
                    for i, case in enumerate(WITHIN_STRIDE_CASES)]


def test_data_movement_kernels_write_what_the_aten_writers_write():
    checked, wide, many_phases, in_place = 0, 0, 0, 0
    relayouts = 0  # calls whose conversions ran relayout's transpose kernel
    padded_rows = set()  # (dtype, channels_last) of checked padded stride-1 rows
    for trial, case, dtype, last in input_cases():
        (x, w, dy), (x64, w64, dy64) = case_operands(case, trial, dtype, last)
        _, _, s, p, d, groups = case
        reference = aten_gradients(dy64, x64, w64, s, p, d, groups)[0]
        theirs = aten_gradients(dy, x, w, s, p, d, groups)[0]
        for forcing in INPUT_FORCINGS:
            where = f"trial {trial} {forcing} {case} {dtype} channels_last={last}"
            try:
                aten_written = input_gradient(case, dy, w, x, forcing)
            except ValueError:
                continue  # the strategy (or writer) cannot serve this shape
            bwdconv._library._C.start_kernel_recording()
            with bwdconv.kernels_on_host():
                ours = input_gradient(case, dy, w, x, forcing)
            launched = [launch["kernel"] for launch in
                        bwdconv._library._C.stop_kernel_recording()["launches"]]
            assert ours.stride() == aten_written.stride(), where
            if forcing[0] == "swap1x1":
                # The kernel's GEMM is laid out like dx, the strided copies'
                # channels-last (docs/DESIGN.md, "swap1x1"), and a cropped dy
                # (padding past a 1x1 tap) reaches the GEMM as a view, so the
                # products may round apart by a unit in the last place.
                torch.testing.assert_close(ours, aten_written, msg=where)
            else:
                assert torch.equal(ours, aten_written), where
            assert_accurate(ours, theirs, reference, where)
            if forcing[0] == "scatter":  # its 64-bit offsets on the same shape
                with bwdconv.kernels_on_host(), wide_offsets():
                    assert torch.equal(input_gradient(case, dy, w, x, forcing), ours), where
                wide += 1
            checked += 1
            many_phases += case in MANY_PHASE_CASES
            in_place += forcing[1] == "in_place"
            relayouts += forcing[0] == "relayout" and "relayout" in launched
            if has_padded_stride_one_row(case):
                padded_rows.add((dtype, last))
    assert checked >= 200 and wide >= 50
    assert many_phases >= 2 * len(MANY_PHASE_CASES) and in_place >= len(IN_PLACE_CASES)
    assert relayouts >= 40  # 55 of the drawn cases are NCHW ones relayout serves
    assert padded_rows == {(dtype, last) for dtype in DTYPES for last in (False, True)}


def test_the_switch_runs_the_kernels_on_the_host_grid():
    """The host grid really runs: its traffic record sees the interleave kernel
    write every element of dx exactly once (and nothing runs it without the switch)."""
    case = ((2, 3, 9, 8), (4, 3, 3, 3), [2, 2], [1, 1], [1, 1], 1)
    (x, w, dy), _ = case_operands(case, 0, torch.float32, False)
    bwdconv._library._C.start_kernel_recording()
    input_gradient(case, dy, w, x, ("phase", None))
    assert bwdconv._library._C.stop_kernel_recording()["launches"] == []
    bwdconv._library._C.start_kernel_recording()
    with bwdconv.kernels_on_host():
        dx = input_gradient(case, dy, w, x, ("phase", None))
    record = bwdconv._library._C.stop_kernel_recording()
    assert [launch["kernel"] for launch in record["launches"]] == ["interleave"]
    stores = record["launches"][0]["store"]
    assert stores["bytes"] == stores["distinct_bytes"] == dx.numel() * dx.element_size()


def test_environment_variable_turns_the_switch_on(monkeypatch):
    """BWDCONV_CPU_KERNELS, as bwdconv reads it at import."""
    try:
        for value, expected in (("host", True), ("aten", False)):
            monkeypatch.setenv("BWDCONV_CPU_KERNELS", value)
            bwdconv._kernels._apply_environment()
            assert bwdconv.kernels_on_host_enabled() is expected
        monkeypatch.setenv("BWDCONV_CPU_KERNELS", "gpu")
        with pytest.raises(ValueError, match="BWDCONV_CPU_KERNELS"):
            bwdconv._kernels._apply_environment()
    finally:
        bwdconv._library._C.set_kernels_on_host(False)


def test_positions_past_the_interleaves_32_bits_go_to_atens_copies():
    """A dx whose row passes the interleave walk's 32-bit positions (2^29
    positions and more along a dim) is written by ATen's strided copies
    instead of the kernel, as on the CPU: swap1x1 computes what aten
    computes, it does not refuse (1D, 2^29 + 5 positions, bfloat16: a 1x1
    filter's dx is dy times the tap at even positions, zeros at odd ones).
    The scatter buffer's fallback is the same, tested on a GPU (test_gpu.py)."""
    case = ((1, 1, 2**29 + 5), (1, 1, 1), [2], [0], [1], 1)
    torch.manual_seed(0)
    dy = torch.randn(1, 1, 2**28 + 3, dtype=torch.bfloat16)
    w = torch.randn(1, 1, 1, dtype=torch.bfloat16)
    x = torch.empty(case[0], dtype=torch.bfloat16)
    bwdconv._library._C.start_kernel_recording()
    with bwdconv.kernels_on_host():
        dx = input_gradient(case, dy, w, x, ("swap1x1", "fused"))
    launched = [launch["kernel"] for launch in bwdconv._library._C.stop_kernel_recording()["launches"]]
    assert launched == []
    assert torch.equal(dx[0, 0, ::2], dy[0, 0] * w[0, 0, 0])
    assert dx[0, 0, 1::2].abs().max().item() == 0
