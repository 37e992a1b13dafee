"""splitk: where its chunk products run, read from the sources (on the vendor
GEMM: ATen's batched GEMM in csrc/ops/splitk.cpp's kernel path, no product
kernel in csrc/hip/splitk.cu)."""
from __future__ import annotations

import re

from . import KERNEL_DIR, ROOT


def splitk_products_source() -> dict:
    """Where splitk's chunk products run, read from the sources. The vendor GEMM
    when csrc/ops/splitk.cpp sends GPU tensors to its kernel path (the class
    whose products call ATen's batched GEMM: aten::bmm / baddbmm, and their
    .dtype_out forms for fp16/bf16 operands with fp32 results, which run on
    cuBLAS / hipBLASLt) and csrc/hip/splitk.cu defines no kernel but the reduce."""
    ops = (ROOT / "csrc" / "ops" / "splitk.cpp").read_text()
    cu = (KERNEL_DIR / "splitk.cu").read_text()
    kernels = re.findall(r"__global__\s+void\s+(?:__launch_bounds__\([^)]*\)\s*)?(\w+)", cu)
    calls = sorted(set(m.group(0).rstrip("( ") for m in
                       re.finditer(r"at::(?:bmm|baddbmm)(?:_out)?\s*\(|\.baddbmm_\s*\(", ops)))
    widened = re.search(r"at::bmm_out\([^;]*scalar_type\(\)\)", ops) is not None
    gpu_path = re.search(r"if \(runs_kernels\(grad_output\)\)\s*return GemmSplitK\(", ops) is not None
    products = [k for k in kernels if "reduce" not in k]
    return {"gemm_calls": calls, "fp32_results_from_16bit_operands": widened,
            "gpu_tensors_take_the_gemm_path": gpu_path, "kernels": kernels,
            "product_kernels": products,
            "vendor_gemm": bool(calls) and gpu_path and not products}
