"""splitk's kernel path (the GPU path: products on the vendor GEMM through
ATen into fp32/fp64 partials, then csrc/hip's in-order reduce kernel), run
for CPU tensors with the kernels on the host grid: its memory, steps whose
staging stays under the cap with the same accuracy and determinism, and its
device-sized chunks. Its accuracy and determinism on random shapes are in
tests/test_host_kernels.py."""

import os

import pytest
import torch

import bwdconv
from conftest import aten_gradients
from test_host_kernels import assert_accurate, case_operands, weight_gradient


def kernel_path(case, dtype=torch.float32):
    x_size, w_size, s, p, d, groups = case
    return bwdconv.explain(list(x_size), list(w_size), s, p, d, groups,
                           dtype=dtype).to_dict()["splitk"]["kernel_path"]


@pytest.mark.parametrize("last", [False, True])
def test_a_small_staging_cap_splits_the_work_into_more_steps_with_the_same_result(
        monkeypatch, last):
    """Under a third of the staging this shape takes in one step per batch row,
    it takes more steps, each under the cap (staged elements x 4 bytes) unless
    a step is down to its one output row per chunk; the result still meets the
    accuracy rule in float64 and float32, and repeats bit for bit."""
    case = ((2, 4, 200, 6), (5, 4, 3, 3), [1, 1], [1, 1], [1, 1], 1)
    whole = kernel_path(case)
    cap = whole["staged_elements_per_step"] * 4 // 3
    monkeypatch.setenv("BWDCONV_SPLITK_STAGING_BYTES", str(cap))
    capped = kernel_path(case)
    assert capped["steps"] > whole["steps"]
    if capped["step_rows"] > 1:
        assert capped["staged_elements_per_step"] * 4 <= cap
    assert capped["chunks"] == whole["chunks"] and capped["partial_bytes"] == whole["partial_bytes"]
    for dtype in (torch.float64, torch.float32):
        (x, w, dy), (x64, w64, dy64) = case_operands(case, 3, dtype, last)
        _, _, s, p, d, groups = case
        reference = aten_gradients(dy64, x64, w64, s, p, d, groups)[1]
        theirs = aten_gradients(dy, x, w, s, p, d, groups)[1]
        with bwdconv.kernels_on_host():
            ours = weight_gradient(case, dy, x, w)
            assert torch.equal(weight_gradient(case, dy, x, w), ours)
        assert_accurate(ours, theirs, reference, f"{dtype} channels_last={last}")


def test_a_bad_staging_cap_is_a_clear_error(monkeypatch):
    case = ((1, 2, 8, 8), (2, 2, 3, 3), [1, 1], [1, 1], [1, 1], 1)
    monkeypatch.setenv("BWDCONV_SPLITK_STAGING_BYTES", "lots")
    with pytest.raises(RuntimeError, match="BWDCONV_SPLITK_STAGING_BYTES"):
        kernel_path(case)


def test_chunks_fill_the_host_and_bound_the_partials():
    """On the CPU the units are the host's threads: at most one wave of GEMM
    tiles (one tile per chunk here), at least 2 chunks; partials = chunks x
    weight elements x 4 bytes."""
    case = ((4, 3, 40, 40), (8, 3, 3, 3), [1, 1], [1, 1], [1, 1], 1)
    layout = kernel_path(case)
    threads = os.cpu_count()
    assert 2 <= layout["chunks"] <= max(2, threads)
    assert layout["partial_bytes"] == layout["chunks"] * 8 * 3 * 9 * 4
