#include "ops/swap1x1.h"

#include <vector>

#include "ops/filter.h"
#include "ops/interleave.h"
#include "ops/kernels.h"

namespace bwdconv::ops {
namespace {

// [N, spatial..., channels]: free for channels_last tensors.
at::Tensor channels_last_view(const at::Tensor& t) {
  std::vector<int64_t> order{0};
  for (int64_t d = 2; d < t.dim(); ++d) order.push_back(d);
  order.push_back(1);
  return t.permute(order);
}

// W^T dy[q] for every q: one GEMM over the channels of the small grad_output.
// Grouped: a grouped 1x1 conv. Ungrouped, for the CPU's strided copies:
// [N*L, K] x [K, C] with the filter read as stored (a transposed filter
// operand makes BLAS backends copy it) and grad_output viewed channels-last
// (free for channels_last, a copy of the small tensor otherwise); the result
// is the channels_last [N, C, L...]. Ungrouped, for the interleave kernel
// (`like_dx`): laid out like dx, so the kernel reads rows of the result as it
// writes rows of dx (an NCHW dx read from a channels_last result would read
// every element C elements after the last): for NCHW the batched
// [C, K] x [N, K, L], whose transposed filter operand GPU BLAS reads as is.
at::Tensor small_gradient(const at::Tensor& grad_output, const at::Tensor& weight,
                          int64_t groups, bool like_dx, at::MemoryFormat format) {
  const int64_t dims = grad_output.dim() - 2;
  if (groups > 1) {
    const std::vector<int64_t> ones(dims, 1), zeros(dims, 0);
    return at::convolution(grad_output, adjoint_filter(weight, groups), std::nullopt, ones,
                           zeros, ones, /*transposed=*/false, zeros, groups);
  }
  const int64_t out_channels = weight.size(0), in_channels = weight.size(1);
  const at::Tensor filter = weight.reshape({out_channels, in_channels});
  if (like_dx && format == at::MemoryFormat::Contiguous) {
    std::vector<int64_t> sizes = grad_output.sizes().vec();
    sizes[1] = in_channels;
    return at::matmul(filter.t(), grad_output.reshape({grad_output.size(0), out_channels, -1}))
        .view(sizes);
  }
  std::vector<int64_t> to_first{0, dims + 1}, last_sizes{grad_output.size(0)};
  for (int64_t d = 2; d < grad_output.dim(); ++d) {
    to_first.push_back(d - 1);
    last_sizes.push_back(grad_output.size(d));
  }
  last_sizes.push_back(in_channels);
  const at::Tensor rows = channels_last_view(grad_output).reshape({-1, out_channels});
  return at::mm(rows, filter).view(last_sizes).permute(to_first);
}

// The in_place writer (docs/DESIGN.md, "swap1x1"): dx's slots dx[n, s*o] as a
// batch of [O_last, C] matrices, rows s_last*C apart and batches
// in_place_batch_stride apart, written by one batched GEMM with a shared filter.
void gemm_into_slots(const ConvGeometry& g, const at::Tensor& grad_output,
                     const at::Tensor& weight, at::Tensor& dx) {
  const int last = g.spatial_dims - 1;
  int64_t batches = g.batch;
  for (int i = 0; i < last; ++i) batches *= g.output[i];
  const int64_t rows = g.output[last], out_channels = g.out_channels;
  const at::Tensor operand =
      channels_last_view(grad_output).reshape({batches, rows, out_channels});
  const at::Tensor filter =
      weight.reshape({out_channels, g.in_channels}).expand({batches, out_channels, g.in_channels});
  at::Tensor slots = dx.as_strided({batches, rows, g.in_channels},
                                   {in_place_batch_stride(g), g.stride[last] * g.in_channels, 1});
  at::bmm_out(slots, operand, filter);
}

}  // namespace

at::Tensor swap1x1_grad_input(const Plan& plan, const at::Tensor& grad_output,
                              const at::Tensor& weight, at::MemoryFormat format) {
  at::Tensor dx = empty_input_gradient(plan, grad_output, format);
  // With K = 1 only phase 0 (every residue 0) has a tap: dx[s*q - p] = W^T dy[q];
  // the other phases are the holes and are zero-filled by the interleave pass.
  std::vector<PhaseInput> inputs(plan.phases.size());
  if (plan.swap1x1->writer == Swap1x1Writer::in_place) {
    // The planner chose in_place from grad_output's layout, which leads dx's.
    TORCH_INTERNAL_ASSERT(format != at::MemoryFormat::Contiguous && dx.is_contiguous(format),
                          "swap1x1 in_place planned for a dx that is not channels_last");
    gemm_into_slots(plan.geometry, grad_output, weight, dx);
    inputs[0].write = hip::PhaseWrite::Keep;
  } else {
    inputs[0].write = hip::PhaseWrite::Copy;
    inputs[0].result = small_gradient(grad_output, weight, plan.geometry.groups,
                                      runs_kernels(dx), format);
  }
  interleave(dx, plan, inputs, ChannelMap{plan.geometry.in_channels, 0});
  return dx;
}

}  // namespace bwdconv::ops
