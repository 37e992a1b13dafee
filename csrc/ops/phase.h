// phase: one stride-1 sub-convolution per non-empty phase, then one
// interleave pass writes all of dx (empty phases' slots as zeros).
#pragma once

#include <ATen/ATen.h>

#include "dispatch/plan.h"

namespace bwdconv::ops {

at::Tensor phase_grad_input(const Plan& plan, const at::Tensor& grad_output,
                            const at::Tensor& weight, at::MemoryFormat format);

}  // namespace bwdconv::ops
