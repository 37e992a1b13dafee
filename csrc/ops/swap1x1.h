// swap1x1: for a 1x1 filter the zero insertion commutes with the channel
// contraction: a GEMM on the small grad_output, then its result is scattered
// into the strided slots of dx, and zeros are written once into the rest.
#pragma once

#include <ATen/ATen.h>

#include "dispatch/plan.h"

namespace bwdconv::ops {

at::Tensor swap1x1_grad_input(const Plan& plan, const at::Tensor& grad_output,
                              const at::Tensor& weight, at::MemoryFormat format);

}  // namespace bwdconv::ops
