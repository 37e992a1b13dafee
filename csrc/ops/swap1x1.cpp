#include "ops/swap1x1.h"

#include <vector>

#include "ops/filter.h"
#include "ops/phase.h"

namespace bwdconv::ops {

at::Tensor swap1x1_grad_input(const Plan& plan, const at::Tensor& grad_output,
                              const at::Tensor& weight, at::IntArrayRef input_sizes,
                              const ConvParams& params, at::MemoryFormat format) {
  const int dims = plan.geometry.spatial_dims;
  const std::vector<int64_t> ones(dims, 1), zeros(dims, 0);
  // W^T dy[q] for every q: a (grouped) GEMM over channels on the small grad_output.
  const at::Tensor small =
      at::convolution(grad_output, adjoint_filter(weight, params.groups), std::nullopt, ones,
                      zeros, ones, /*transposed=*/false, zeros, params.groups);
  at::Tensor dx = at::empty(input_sizes, grad_output.options().memory_format(format));
  // With K = 1 only phase 0 has a tap (dx[s*q - p] = W^T dy[q]); the other
  // phases are the holes and are zero-filled.
  for (const Phase& phase : plan.phases) write_phase(dx, phase, phase.empty() ? at::Tensor() : small);
  return dx;
}

}  // namespace bwdconv::ops
