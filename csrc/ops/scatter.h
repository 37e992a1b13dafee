// scatter: one pass writes the whole zero-inserted, padded grad_output (values
// and zeros alike), then a stride-1 convolution with the adjoint filter.
#pragma once

#include <ATen/ATen.h>

#include "dispatch/plan.h"

namespace bwdconv::ops {

at::Tensor scatter_grad_input(const Plan& plan, const at::Tensor& grad_output,
                              const at::Tensor& weight, at::MemoryFormat format);

}  // namespace bwdconv::ops
