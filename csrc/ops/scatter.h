// scatter: one pass writes the whole zero-inserted, padded grad_output (values
// and zeros alike), then a stride-1 convolution with the adjoint filter.
#pragma once

#include <ATen/ATen.h>

#include "dispatch/plan.h"
#include "ops/geometry.h"

namespace bwdconv::ops {

at::Tensor scatter_grad_input(const Plan& plan, const at::Tensor& grad_output,
                              const at::Tensor& weight, const ConvParams& params,
                              at::MemoryFormat format);

}  // namespace bwdconv::ops
