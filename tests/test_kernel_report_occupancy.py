"""Theoretical occupancy (tools/kernel_report/occupancy.py). The expected
occupancies are those of the static kernel review of 2026-11-23, computed there
by hand."""
import pytest

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

