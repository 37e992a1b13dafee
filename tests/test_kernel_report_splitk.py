"""Where splitk's products run, read from the sources (tools/kernel_report/splitk.py)."""
from kernel_report import splitk


def test_splitk_products_run_on_the_vendor_gemm_per_the_sources():
    source = splitk.splitk_products_source()
    assert source["vendor_gemm"] and source["gpu_tensors_take_the_gemm_path"]
    assert source["fp32_results_from_16bit_operands"]
    assert source["kernels"] == ["splitk_reduce_kernel"] and source["product_kernels"] == []

