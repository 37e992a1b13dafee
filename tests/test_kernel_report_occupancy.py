"""Theoretical occupancy (tools/kernel_report/occupancy.py). The expected
occupancies are those of the static kernel review of 2026-11-23, computed there
by hand."""
import pytest

from kernel_report import occupancy
from kernel_report.occupancy import gfx940_occupancy, sm90_occupancy


@pytest.mark.parametrize("registers, smem, blocks, occupancy", [
    (28, 0, 8, 1.0), (40, 0, 6, 0.75), (72, 8704, 3, 0.375), (80, 16896, 3, 0.375)])
def test_sm90_occupancy(registers, smem, blocks, occupancy):
    r = sm90_occupancy(registers, smem)
    assert (r["blocks"], r["occupancy"]) == (blocks, occupancy)


@pytest.mark.parametrize("vgpr, lds, waves", [(32, 24576, 2), (32, 6144, 8), (88, 8704, 5),
                                              (82, 16896, 3)])
def test_gfx940_occupancy(vgpr, lds, waves):
    assert gfx940_occupancy(vgpr, 0, lds)["waves_per_simd"] == waves


def test_rows_use_each_kernels_own_block_size():
    """tap_gemm's 128-thread blocks: 96 registers and 31744 B of shared memory
    give 5 blocks of 4 warps (20 of 64 warps) on sm_90; the same resources
    in 256-thread blocks would give 2 blocks (16 warps)."""
    record = {"kernel": "tap_gemm_kernel<Half>", "role": "matrix",
              "targets": {"sm_90": {"registers": 96, "smem": 31744}}}
    row = occupancy.occupancy_rows([record])[0]
    assert row["sm_90"]["blocks"] == 5 and row["sm_90"]["occupancy"] == 20 / 64
    record["kernel"] = "interleave_kernel<unsigned short, int>"
    assert occupancy.occupancy_rows([record])[0]["sm_90"]["blocks"] == 2
