"""bwdconv.peak_memory: the CPU count of c10's allocations (docs/DESIGN.md,
"Memory"): what a region allocates and frees, nesting, other threads, and
nothing counted outside a region; the memory bounds DESIGN.md states for
splitk's sum and boxes, scatter's buffer and phase_stacked's stacked filter,
measured on shapes where each binds; swap1x1 at stride 1 writing dx with its
GEMMs; and aten's stand-in operand, which takes no memory."""

import math
import threading

import pytest
import torch

import bwdconv
from bwdconv._library import _C

MB = 10**6


def test_a_region_counts_the_bytes_it_allocates_at_their_highest():
    with bwdconv.peak_memory("cpu") as kept:
        t = torch.empty(MB, dtype=torch.float32)
    assert kept.bytes == 4 * MB
    with bwdconv.peak_memory("cpu") as freed:
        for _ in range(3):
            torch.empty(MB, dtype=torch.float64)  # freed before the next
    assert freed.bytes == 8 * MB
    del t


def test_allocations_before_the_region_are_not_counted_in_it():
    earlier = torch.empty(MB)
    with bwdconv.peak_memory("cpu") as peak:
        del earlier
        torch.empty(MB // 2)
    assert peak.bytes == 2 * MB


def test_regions_nest_and_the_enclosing_one_keeps_the_inner_peak():
    with bwdconv.peak_memory("cpu") as outer:
        a = torch.empty(MB)
        with bwdconv.peak_memory("cpu") as inner:
            torch.empty(2 * MB)
        with bwdconv.peak_memory("cpu") as second:
            torch.empty(MB // 4)
        del a
    assert (inner.bytes, second.bytes, outer.bytes) == (8 * MB, MB, 12 * MB)


def test_other_threads_allocations_are_counted():
    def allocate():
        torch.empty(3 * MB, dtype=torch.uint8)

    with bwdconv.peak_memory("cpu") as peak:
        thread = threading.Thread(target=allocate)
        thread.start()
        thread.join()
    assert peak.bytes == 3 * MB


def test_nothing_is_counted_outside_a_region():
    with bwdconv.peak_memory("cpu"):
        kept = torch.empty(MB)
    counted = _C.counted_cpu_bytes()
    outside = torch.empty(5 * MB)
    assert _C.counted_cpu_bytes() == counted
    del kept  # counted while the region was open: its free is counted
    assert _C.counted_cpu_bytes() == counted - 4 * MB
    del outside
    assert _C.counted_cpu_bytes() == counted - 4 * MB


# ---- the bounds docs/DESIGN.md states, measured --------------------------------
# Expected bytes come from DESIGN.md's text (its formulas, worked out in the
# comments) with int math; the strategies run through the tuner's explicit path.

def measured(call):
    """The peak bytes one call adds, after a warm-up call (what a first call
    allocates once)."""
    call()
    with bwdconv.peak_memory("cpu") as peak:
        call()
    return peak.bytes


def measured_peak(gradient, strategy, grad_output, operand, sizes, stride, padding):
    return measured(lambda: _C.gradient_with(gradient, strategy, None, grad_output, operand,
                                             sizes, stride, padding, [1] * len(stride), 1))


def aten_convolution_peak(input, weight, padding):
    """What aten's stride-1 convolution of these operands takes, its output included."""
    ones = [1] * (input.dim() - 2)
    return measured(lambda: torch.ops.aten.convolution(input, weight, None, ones, padding, ones,
                                                       False, [0] * len(ones), 1))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_splitk_holds_its_sum_and_one_box(dtype):
    # 3x3 stride 2, no padding, 2x2 outputs of 2 batch rows, a
    # reduction too short for more than the least 2 chunks: 2 boxes of one
    # batch row each. The fp32 sum of 2.36M weight elements (9.4 MB) is held
    # throughout, and one box at a time: its fp32 copies of the input window
    # and grad_output rows (views in float32) and what aten's weight gradient
    # of the box takes, its fp32 partial included.
    m = c = 512
    x = torch.randn(2, c, 5, 5, dtype=dtype)
    dy = torch.randn(2, m, 2, 2, dtype=dtype)
    plan = bwdconv.explain(x, torch.empty(m, c, 3, 3, dtype=dtype), [2, 2], [0, 0], [1, 1], 1)
    assert (plan.to_dict()["splitk"]["batch_chunks"], plan.to_dict()["splitk"]["space_chunks"]) \
        == (2, 1)
    weight_elements = m * c * 9
    box_x, box_dy = x[:1].float(), dy[:1].float()
    box_weight = torch.empty(m, c, 3, 3)
    box = measured(lambda: torch.ops.aten.convolution_backward(
        box_dy, box_x, box_weight, None, [2, 2], [0, 0], [1, 1], False, [0, 0], 1,
        [False, True, False])[1])
    copies = 0 if dtype == torch.float32 else (box_x.numel() + box_dy.numel()) * 4
    peak = measured_peak("weight", "splitk", dy, x, [m, c, 3, 3], [2, 2], [0, 0])
    assert 2 * weight_elements * 4 <= peak <= weight_elements * 4 + copies + box


def test_scatters_buffer_is_what_design_states():
    # 1x1 filter, stride 4, no padding, input 64 from 16 outputs: lead
    # L = d(K-1) - p = 0, output padding op = 64 - ((16-1)*4 - 0 + 0 + 1) = 3,
    # buffer length (O-1)s + 1 + L + (L + op) = 64 per dim: 16 times
    # grad_output. float64, whose 1x1 convolution has no workspace to hide in.
    n, m, c = 2, 32, 32
    dy = torch.randn(n, m, 16, 16, dtype=torch.float64)
    weight = torch.randn(m, c, 1, 1, dtype=torch.float64)
    buffer = n * m * 64 * 64 * 8
    grad_input = n * c * 64 * 64 * 8
    adjoint_filter = m * c * 8
    convolution = aten_convolution_peak(torch.zeros(n, m, 64, 64, dtype=torch.float64),
                                        torch.zeros(c, m, 1, 1, dtype=torch.float64), [0, 0])
    assert convolution >= grad_input
    peak = measured_peak("input", "scatter", dy, weight, [n, c, 64, 64], [4, 4], [0, 0])
    assert buffer + grad_input <= peak <= buffer + adjoint_filter + convolution


def test_relayout_releases_its_copies_before_converting_the_gradient_back():
    # 3x3, stride 2, NCHW float32: aten's dx in channels_last and its NCHW
    # conversion are held together (2 dx); grad_output's and the weight's
    # channels_last copies are gone by then, so the peak stays below what
    # holding them too would take (dy + w + 2 dx).
    n, c = 2, 64
    x = torch.zeros(n, c, 64, 64)
    weight = torch.randn(c, c, 3, 3)
    dy = torch.randn(n, c, 32, 32)
    grad_input = x.numel() * 4
    peak = measured_peak("input", "relayout", dy, weight, list(x.shape), [2, 2], [1, 1])
    assert 2 * grad_input <= peak < (dy.numel() + weight.numel()) * 4 + 2 * grad_input


def test_phase_stackeds_filter_is_what_design_states():
    # 3x3, stride 2, padding 1, input 4 (2 outputs), per dim ("Geometry"):
    # phase 0 has taps 0 and 2 (m 0 and 1, conv_padding 1), phase 1 tap 1
    # (m 0): common filter F = 2, P = 1, 4 stacked phases; the stacked filter
    # is 4 x C x M x 2 x 2 elements, and while it is filled one phase's
    # adjoint sub-filter, at most C x M x 2 x 2. Stacked output rows
    # O + 2P - (F - 1) = 3.
    m = c = 256
    dy = torch.randn(1, m, 2, 2, dtype=torch.float64)
    weight = torch.randn(m, c, 3, 3, dtype=torch.float64)
    stacked_filter = 4 * c * m * 2 * 2 * 8
    sub_filter = c * m * 2 * 2 * 8
    grad_input = c * 4 * 4 * 8
    convolution = aten_convolution_peak(dy, torch.zeros(4 * c, m, 2, 2, dtype=torch.float64),
                                        [1, 1])
    assert convolution >= 4 * c * 3 * 3 * 8
    peak = measured_peak("input", "phase_stacked", dy, weight, [1, c, 4, 4], [2, 2], [1, 1])
    assert stacked_filter <= peak <= stacked_filter + sub_filter + convolution + grad_input


# ---- swap1x1 at stride 1: the GEMM writes dx (docs/DESIGN.md, "swap1x1") ----

def gemm_workspace(rows, out_channels, in_channels, dtype, transposed):
    """What one [rows, K] x [K, C] GEMM allocates besides its result, its
    operands laid out as swap1x1's: grad_output's and dx's rows of one batch
    row of NCHW are transposed views, those of one position row-major."""
    def matrix(rows, columns):
        return torch.randn(columns, rows, dtype=dtype).t() if transposed \
            else torch.randn(rows, columns, dtype=dtype)

    a, out = matrix(rows, out_channels), matrix(rows, in_channels)
    b = torch.randn(out_channels, in_channels, dtype=dtype)
    return measured(lambda: torch.mm(a, b, out=out))


@pytest.mark.parametrize("channels_last, spatial", [(False, (7, 7)), (True, (7, 7)),
                                                     (False, (1, 1)), (False, (5,))])
def test_swap1x1_at_stride_1_allocates_dx_alone(channels_last, spatial):
    # float32, whose CPU GEMM (MKL) allocates nothing through c10: the GEMMs
    # write dx, one per batch row for NCHW, one in all for channels_last or one
    # position, with no result to copy and no copy of grad_output.
    n, c, m = 4, 16, 32
    dy = torch.randn(n, m, *spatial)
    if channels_last:
        dy = dy.contiguous(memory_format=torch.channels_last)
    weight = torch.randn(m, c, *[1] * len(spatial))
    ones, zeros = [1] * len(spatial), [0] * len(spatial)
    peak = measured_peak("input", "swap1x1", dy, weight, [n, c, *spatial], ones, zeros)
    assert peak == n * c * math.prod(spatial) * 4


@pytest.mark.parametrize("case", [(4, 16, 3, 64), (4, 32, 1, 128)])
def test_swap1x1_at_stride_1_in_bfloat16_adds_only_its_gemms_workspace(case):
    # oneDNN's bfloat16 GEMM allocates a workspace through c10 (packing the
    # filter): dx and one GEMM's workspace are the peak, whatever the rows.
    n, c, side, m = case
    dy = torch.randn(n, m, side, side, dtype=torch.bfloat16)
    weight = torch.randn(m, c, 1, 1, dtype=torch.bfloat16)
    if side == 1:  # one GEMM in all
        workspace = gemm_workspace(n, m, c, torch.bfloat16, transposed=False)
    else:  # one per batch row
        workspace = gemm_workspace(side * side, m, c, torch.bfloat16, transposed=True)
    grad_input = n * c * side * side * 2
    peak = measured_peak("input", "swap1x1", dy, weight, [n, c, side, side], [1, 1], [0, 0])
    assert grad_input <= peak <= grad_input + workspace


def test_swap1x1_at_stride_1_fits_the_default_memory_budget():
    # ResNet-50's smallest 1x1 stride-1 line with more than one position (1/8
    # scale), bfloat16 NCHW: swap1x1 takes at most aten's peak plus the
    # gradient's bytes, the autotuner's default budget. With a result copied
    # into dx and grad_output copied channels-last it took 2944 B more.
    x = torch.randn(4, 8, 7, 7, dtype=torch.bfloat16)
    weight = torch.randn(8, 8, 1, 1, dtype=torch.bfloat16)
    dy = torch.randn(4, 8, 7, 7, dtype=torch.bfloat16)
    atens = measured(lambda: torch.ops.aten.convolution_backward(
        dy, x, weight, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1, [True, False, False])[0])
    peak = measured_peak("input", "swap1x1", dy, weight, list(x.shape), [1, 1], [0, 0])
    assert peak <= atens + x.numel() * 2


# ---- aten's stand-in operand (docs/DESIGN.md, "aten") -----------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("case", [
    ((2, 16, 12, 12), (16, 16, 3, 3), [2, 2], [1, 1], [1, 1], 1, False),
    ((2, 16, 12, 12), (16, 8, 3, 3), [2, 2], [1, 1], [2, 2], 2, True),
    ((2, 8, 6, 7, 8), (16, 8, 3, 3, 3), [2, 2, 2], [1, 1, 1], [1, 1, 1], 1, True),
    ((2, 8, 30), (8, 8, 3), [2], [1], [1], 1, False),
])
def test_atens_gradients_through_bwdconv_take_what_pytorchs_call_takes(dtype, case):
    # The operand a gradient does not read lies in address space no memory
    # backs: through bwdconv's op, aten's peak is PyTorch's own call's, whose
    # caller holds that operand already (it took one gradient's bytes more).
    input_sizes, weight_sizes, stride, padding, dilation, groups, channels_last = case
    x, weight = torch.randn(input_sizes, dtype=dtype), torch.randn(weight_sizes, dtype=dtype)
    if channels_last:  # both, as the stand-in of either is
        layout = torch.channels_last if x.dim() == 4 else torch.channels_last_3d
        x, weight = (t.contiguous(memory_format=layout) for t in (x, weight))
    args = (stride, padding, dilation)
    dy = torch.randn_like(torch.ops.aten.convolution(x, weight, None, *args, False,
                                                     [0] * len(stride), groups))
    for index, ours in ((0, lambda: torch.ops.bwdconv.convolution_backward_input(
            dy, weight, list(x.shape), *args, groups)),
                        (1, lambda: torch.ops.bwdconv.convolution_backward_weight(
            dy, x, list(weight.shape), *args, groups))):
        mask = [index == 0, index == 1, False]

        def atens():
            return torch.ops.aten.convolution_backward(dy, x, weight, None, *args, False,
                                                       [0] * len(stride), groups, mask)[index]

        with bwdconv.force_strategy("aten"):
            assert torch.equal(ours(), atens())
            assert measured(ours) == measured(atens)
