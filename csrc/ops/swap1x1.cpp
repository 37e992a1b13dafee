#include "ops/swap1x1.h"

#include <vector>

#include "ops/filter.h"
#include "ops/interleave.h"

namespace bwdconv::ops {
namespace {

// W^T dy[q] for every q: one GEMM over the channels of the small grad_output.
// Ungrouped: [N*L, K] x [K, C] with the filter read as stored (a transposed
// filter operand makes BLAS backends copy it) and grad_output viewed
// channels-last (free for channels_last, a copy of the small tensor otherwise);
// the result is the channels_last [N, C, L...]. Grouped: a grouped 1x1 conv.
at::Tensor small_gradient(const at::Tensor& grad_output, const at::Tensor& weight,
                          int64_t groups) {
  const int64_t dims = grad_output.dim() - 2;
  if (groups > 1) {
    const std::vector<int64_t> ones(dims, 1), zeros(dims, 0);
    return at::convolution(grad_output, adjoint_filter(weight, groups), std::nullopt, ones,
                           zeros, ones, /*transposed=*/false, zeros, groups);
  }
  const int64_t out_channels = weight.size(0), in_channels = weight.size(1);
  std::vector<int64_t> to_last{0}, to_first{0, dims + 1}, last_sizes{grad_output.size(0)};
  for (int64_t d = 2; d < grad_output.dim(); ++d) {
    to_last.push_back(d);
    to_first.push_back(d - 1);
    last_sizes.push_back(grad_output.size(d));
  }
  to_last.push_back(1);
  last_sizes.push_back(in_channels);
  const at::Tensor rows = grad_output.permute(to_last).reshape({-1, out_channels});
  return at::mm(rows, weight.reshape({out_channels, in_channels}))
      .view(last_sizes)
      .permute(to_first);
}

}  // namespace

at::Tensor swap1x1_grad_input(const Plan& plan, const at::Tensor& grad_output,
                              const at::Tensor& weight, at::IntArrayRef input_sizes,
                              const ConvParams& params, at::MemoryFormat format) {
  const at::Tensor small = small_gradient(grad_output, weight, params.groups);
  at::Tensor dx = at::empty(input_sizes, grad_output.options().memory_format(format));
  // With K = 1 only phase 0 (every residue 0) has a tap: dx[s*q - p] = W^T dy[q];
  // the other phases are the holes and are zero-filled in the same pass.
  std::vector<PhaseInput> inputs(plan.phases.size());
  inputs[0].write = hip::PhaseWrite::Copy;
  inputs[0].result = small;
  interleave(dx, plan.geometry, inputs, ChannelMap{plan.geometry.in_channels, 0});
  return dx;
}

}  // namespace bwdconv::ops
