// splitk: the weight gradient with its (batch x output space) reduction split
// into chunks, each reduced into an fp32 (fp64 for float64) partial, and the
// partials summed in a fixed order: the same bits on every run.
#pragma once

#include <ATen/ATen.h>

#include "dispatch/plan.h"

namespace bwdconv::ops {

at::Tensor splitk_grad_weight(const Plan& plan, const at::Tensor& grad_output,
                              const at::Tensor& input, at::MemoryFormat format);

// The kernel path's layout (dispatch/splitk.h) for a geometry whose tensors
// are `dtype` on `device`: the units of that device, the GEMM's operand and
// result sizes there, and the staging cap (BWDCONV_SPLITK_STAGING_BYTES,
// read on every call; by default 128 KiB per unit, at least 16 MiB).
SplitKGemmLayout splitk_kernel_layout(const ConvGeometry& geometry, c10::Device device,
                                      at::ScalarType dtype);

}  // namespace bwdconv::ops
