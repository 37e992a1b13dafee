// phase_stacked: the non-empty phases' sub-filters, zero-padded to one size,
// stacked into the output channels of ONE stride-1 convolution; then one
// interleave-and-crop pass builds dx.
#pragma once

#include <ATen/ATen.h>

#include "dispatch/plan.h"

namespace bwdconv::ops {

at::Tensor phase_stacked_grad_input(const Plan& plan, const at::Tensor& grad_output,
                                    const at::Tensor& weight, at::MemoryFormat format);

}  // namespace bwdconv::ops
