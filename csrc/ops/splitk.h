// splitk: the weight gradient with its (batch x output space) reduction split
// into chunks, each reduced into an fp32 (fp64 for float64) partial, and the
// partials summed in a fixed order (docs/DESIGN.md, "splitk"). Each chunk is
// one aten weight gradient over its input window, so the sum repeats bit for
// bit wherever aten's weight gradient does (always on the CPU; on GPUs under
// torch.use_deterministic_algorithms).
#pragma once

#include <ATen/ATen.h>

#include "dispatch/plan.h"

namespace bwdconv::ops {

at::Tensor splitk_grad_weight(const Plan& plan, const at::Tensor& grad_output,
                              const at::Tensor& input, at::MemoryFormat format);

}  // namespace bwdconv::ops
