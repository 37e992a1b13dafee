// relayout: aten's gradient in channels_last for an NCHW (NCDHW) call, the
// operands converted there and the result converted back to the layout
// PyTorch gives the gradient (docs/DESIGN.md, "relayout").
#pragma once

#include <ATen/ATen.h>

#include "dispatch/plan.h"

namespace bwdconv::ops {

at::Tensor relayout_grad_input(const Plan& plan, const at::Tensor& grad_output,
                               const at::Tensor& weight, at::MemoryFormat format);

at::Tensor relayout_grad_weight(const Plan& plan, const at::Tensor& grad_output,
                                const at::Tensor& input, at::MemoryFormat format);

}  // namespace bwdconv::ops
