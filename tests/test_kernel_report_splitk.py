"""Where splitk's products run, read from the sources, and its model on seed
001's line (tools/kernel_report/splitk.py)."""
import pytest

from kernel_report import devices, seeds, splitk


def test_splitk_products_run_on_the_vendor_gemm_per_the_sources():
    source = splitk.splitk_products_source()
    assert source["vendor_gemm"] and source["gpu_tensors_take_the_gemm_path"]
    assert source["fp32_results_from_16bit_operands"]
    assert source["kernels"] == ["splitk_reduce_kernel"] and source["product_kernels"] == []


# The planner's layout for seed 001's line on an H100 (scripts/splitk_layout.cpp
# prints it: 113 ranges of 2 output rows over the whole batch, 3 taps by offset).
H100_SEED_001_LAYOUT = {"chunks": 113, "batch_per_chunk": 16, "batch_chunks": 1,
                        "rows_per_chunk": 2, "space_chunks": 113, "offset_taps": 3,
                        "staged_taps": 3, "halo_rows": 2, "step_rows": 2, "tiles_per_chunk": 1,
                        "staging_cap_bytes": 17301504, "partial_cap_bytes": 67108864,
                        "gemm_tile": 128}


def test_splitk_model_of_seed_001_on_an_h100():
    line = next(l for l in seeds.read_seeds() if l.direction == 4)
    m = splitk.model_splitk(line, devices.H100, H100_SEED_001_LAYOUT)
    # roofline: x (25.9 MB) + dy (103.7 MB) at 3.35 TB/s
    assert m["roofline_us"] == pytest.approx(38.7, abs=0.1)
    # 16 batch rows, each a step of the 112 full ranges and one of the 1-row last range
    assert m["step_groups"] == 32 and m["aten_calls"] == 1 + 32 * 4 + 1
    # staged: 16 channels x 3 taps x 225 columns per staged row, 2 halo rows per range
    assert m["bytes_mb"]["staged_writes"] == pytest.approx(
        16 * 16 * 3 * 225 * 2 * (112 * (2 + 2) + (1 + 2)) / 1e6, abs=0.1)
    assert m["gemm_gflop"] == pytest.approx(2 * 64 * 16 * 9 * 16 * 225 * 225 / 1e9, abs=0.01)
    assert m["device_fill"] == pytest.approx(113 / 132, abs=1e-3)
    assert m["times_roofline"] <= 3 < m["no_reuse_times_roofline"]
