#include "ops/precompiled.h"  // first, as the precompiled header must be

#include "ops/swap1x1.h"

#include <ATen/TensorUtils.h>
#include <c10/util/accumulate.h>

#include <optional>
#include <string>
#include <vector>

#include "ops/aten.h"
#include "ops/kernels.h"
#include "ops/filter.h"

namespace bwdconv::ops {
namespace {

// [N, spatial..., channels]: free for channels_last tensors.
at::Tensor channels_last_view(const at::Tensor& t) {
  std::vector<int64_t> order{0};
  for (int64_t d = 2; d < t.dim(); ++d) order.push_back(d);
  order.push_back(1);
  return t.permute(order);
}

// The taps of the filter, T = prod(K) of them, as one GEMM operand: element
// [o, t*C/g + c] of group g's block is w[g*O/g + o, c, tap t] (taps row-major),
// so that tap t's products are channels [t*C/g, (t+1)*C/g) of each group's
// block of T*C/g result channels. Ungrouped: the matrix [O, T*C] (a view of
// the weight for a 1x1 filter). Grouped: the filter [g*T*C/g, O/g, 1...] of
// a grouped 1x1 convolution.
at::Tensor stacked_taps(const at::Tensor& weight, int64_t groups) {
  const bool one_by_one = c10::multiply_integers(weight.sizes().slice(2)) == 1;
  if (groups == 1 && one_by_one) {
    return weight.reshape({weight.size(0), weight.size(1)});  // nothing to build or keep
  }
  const auto transform = [&] { return "swap1x1 taps groups " + std::to_string(groups); };
  return cached_filter(weight, transform, [&] {
    const int64_t out_channels = weight.size(0), per_group = weight.size(1);
    const int64_t taps = c10::multiply_integers(weight.sizes().slice(2));
    if (groups == 1) {
      return weight.reshape({out_channels, per_group, taps})
          .transpose(1, 2)
          .reshape({out_channels, taps * per_group});
    }
    std::vector<int64_t> sizes{groups * taps * per_group, out_channels / groups};
    sizes.resize(weight.dim(), 1);
    return weight.reshape({groups, out_channels / groups, per_group, taps})
        .permute({0, 3, 2, 1})
        .reshape(sizes);
  });
}

// W_t^T dy[q] for every q and tap t: one GEMM over the channels of the small
// grad_output (a grouped 1x1 convolution when grouped), result channels as
// stacked_taps orders them. Ungrouped, for the CPU's strided copies:
// [N*L, K] x [K, T*C] with the filter read as stored (a transposed filter
// operand makes BLAS backends copy it) and grad_output viewed channels-last
// (free for channels_last, a copy of the small tensor otherwise); the result
// is the channels_last [N, T*C, L...]. Ungrouped, for the interleave kernel
// (`like_dx`): laid out like dx, so the kernel reads rows of the result as it
// writes rows of dx (an NCHW dx read from a channels_last result would read
// every element T*C elements after the last): for NCHW the batched
// [T*C, K] x [N, K, L], whose transposed filter operand GPU BLAS reads as is.
at::Tensor small_gradient(const at::Tensor& grad_output, const at::Tensor& weight,
                          int64_t groups, bool like_dx, at::MemoryFormat format) {
  const int64_t dims = grad_output.dim() - 2;
  const at::Tensor filter = stacked_taps(weight, groups);
  if (groups > 1) {
    const std::vector<int64_t> ones(dims, 1), zeros(dims, 0);
    return stride1_convolution(grad_output, filter, zeros, ones, groups);
  }
  const int64_t out_channels = weight.size(0), result_channels = filter.size(1);
  if (like_dx && format == at::MemoryFormat::Contiguous) {
    std::vector<int64_t> sizes = grad_output.sizes().vec();
    sizes[1] = result_channels;
    return at::matmul(filter.t(), grad_output.reshape({grad_output.size(0), out_channels, -1}))
        .view(sizes);
  }
  std::vector<int64_t> to_first{0, dims + 1}, last_sizes{grad_output.size(0)};
  for (int64_t d = 2; d < grad_output.dim(); ++d) {
    to_first.push_back(d - 1);
    last_sizes.push_back(grad_output.size(d));
  }
  last_sizes.push_back(result_channels);
  const at::Tensor rows = channels_last_view(grad_output).reshape({-1, out_channels});
  return at::mm(rows, filter).view(last_sizes).permute(to_first);
}

// `t` [..., channels] as one [rows, channels] matrix over the same memory, or
// nothing where its strides do not allow it (a channels_last_view of NCHW
// with more than one batch row and position).
std::optional<at::Tensor> as_matrix(const at::Tensor& t) {
  const std::vector<int64_t> sizes{c10::multiply_integers(t.sizes().slice(0, t.dim() - 1)),
                                   t.size(-1)};
  const auto strides = at::detail::computeStride(t.sizes(), t.strides(), sizes);
  if (!strides) return std::nullopt;
  return t.as_strided(sizes, *strides);
}

// The CPU's writer where the GEMM's result is dx itself (docs/DESIGN.md,
// "swap1x1"): stride 1, no padding, one group (so a 1x1 filter), and
// dx[q] = W^T dy[q] at every position. One [N*L, K] x [K, C] GEMM writes dx
// where dx and grad_output are each one such matrix (channels_last, or one
// position); otherwise one [L, K] x [K, C] GEMM per batch row on views of
// that row (transposed ones for NCHW). No result to copy, no copy of
// grad_output: dx and the GEMM's own workspace are all it allocates.
void gemm_into_dx(const at::Tensor& grad_output, const at::Tensor& weight, at::Tensor& dx) {
  const at::Tensor filter = weight.reshape({weight.size(0), weight.size(1)});
  const at::Tensor dy_rows = channels_last_view(grad_output), dx_rows = channels_last_view(dx);
  const std::optional<at::Tensor> dy_matrix = as_matrix(dy_rows), dx_matrix = as_matrix(dx_rows);
  if (dy_matrix && dx_matrix) {
    at::Tensor out = *dx_matrix;
    at::mm_out(out, *dy_matrix, filter);
    return;
  }
  for (int64_t n = 0; n < dx.size(0); ++n) {
    std::optional<at::Tensor> out = as_matrix(dx_rows[n]), rows = as_matrix(dy_rows[n]);
    TORCH_INTERNAL_ASSERT(out, "swap1x1: a batch row of dx is not one matrix");
    at::mm_out(*out, rows ? *rows : as_matrix(dy_rows[n].contiguous()).value(), filter);
  }
}

bool gemm_writes_dx(const ConvGeometry& g) {
  return g.groups == 1 && all_equal_to(g.stride, g.spatial_dims, 1) &&
         all_equal_to(g.padding, g.spatial_dims, 0);
}

// Tap t (row-major over the filter) of a phase with one tap per dim.
int64_t tap_index(const Phase& phase, const ConvGeometry& g) {
  int64_t t = 0;
  for (int i = 0; i < g.spatial_dims; ++i) t = t * g.filter[i] + phase.dims[i].first_tap;
  return t;
}

// The filter operand of the outer taps `outer` (every dim's tap but the
// last's): w[o, c, outer..., j] as [O, K_last * C], column j*C + c.
at::Tensor last_dim_taps(const at::Tensor& weight, const std::vector<int64_t>& outer) {
  const auto transform = [&] {
    std::string text = "swap1x1 last-dim taps at";
    for (const int64_t t : outer) text += " " + std::to_string(t);
    return text;
  };
  return cached_filter(weight, transform, [&] {
    at::Tensor taps = weight;
    for (const int64_t t : outer) taps = taps.select(2, t);  // [O, C, K_last]
    return taps.permute({0, 2, 1}).reshape({weight.size(0), -1});
  });
}

// The in_place writer (docs/DESIGN.md, "swap1x1"): for each tap t of the
// outer dims, dx's slots dx[n, s*o + t*d] as a batch of [O_last, K_last*C]
// matrices (the last dim's taps side by side), rows s_last*C apart and
// batches in_place_batch_stride apart, starting at the tap's offset,
// written by one batched GEMM with a shared filter.
void gemm_into_slots(const ConvGeometry& g, const at::Tensor& grad_output,
                     const at::Tensor& weight, at::Tensor& dx) {
  const int last = g.spatial_dims - 1;
  int64_t batches = g.batch;
  for (int i = 0; i < last; ++i) batches *= g.output[i];
  const int64_t rows = g.output[last], out_channels = g.out_channels;
  const int64_t columns = g.filter[last] * g.in_channels;
  const std::vector<int64_t> slot_strides{in_place_batch_stride(g),
                                          g.stride[last] * g.in_channels, 1};
  const at::Tensor operand =
      channels_last_view(grad_output).reshape({batches, rows, out_channels});
  std::vector<int64_t> outer(last, 0);  // the outer dims' taps, row-major
  while (true) {
    int64_t offset = dx.storage_offset();
    for (int i = 0; i < last; ++i) offset += outer[i] * g.dilation[i] * dx.stride(2 + i);
    at::Tensor slots = dx.as_strided({batches, rows, columns}, slot_strides, offset);
    at::bmm_out(slots, operand,
                last_dim_taps(weight, outer).expand({batches, out_channels, columns}));
    int i = last - 1;
    while (i >= 0 && ++outer[i] == g.filter[i]) outer[i--] = 0;
    if (i < 0) break;
  }
}

}  // namespace

at::Tensor swap1x1_grad_input(const Plan& plan, const at::Tensor& grad_output,
                              const at::Tensor& weight, at::MemoryFormat format) {
  const ConvGeometry& g = plan.geometry;
  at::Tensor dx = empty_input_gradient(plan, grad_output, format);
  std::vector<PhaseInput> inputs(plan.phases.size());
  if (plan.swap1x1->writer == Swap1x1Writer::in_place) {
    // The planner chose in_place from grad_output's layout, which leads dx's.
    TORCH_INTERNAL_ASSERT(format != at::MemoryFormat::Contiguous && dx.is_contiguous(format),
                          "swap1x1 in_place planned for a dx that is not channels_last");
    // Tap t's phase (residue t*d, no padding) is dx[s*q + t*d] = W_t^T dy[q],
    // every slot of it (planner: in_place_refusal); the others are holes.
    gemm_into_slots(g, grad_output, weight, dx);
    bool holes = false;
    for (size_t n = 0; n < plan.phases.size(); ++n) {
      if (!plan.phases[n].empty()) inputs[n].write = hip::PhaseWrite::Keep;
      holes = holes || plan.phases[n].empty();
    }
    if (holes) interleave(dx, plan, inputs, ChannelMap{g.in_channels, 0});
    return dx;
  }
  if (!runs_kernels(dx) && gemm_writes_dx(g)) {
    gemm_into_dx(grad_output, weight, dx);
    return dx;
  }
  // A filter within the stride gives each tap t a phase of its own, residue
  // t*d with no row shift: dx[s*q + t*d - p] = W_t^T dy[q] (docs/DESIGN.md,
  // "swap1x1"); the phases without a tap are the holes, zero-filled by the
  // interleave pass.
  const at::Tensor result =
      small_gradient(grad_output, weight, g.groups, runs_kernels(dx), format);
  const int64_t per_group = g.in_channels / g.groups;
  const int64_t taps = c10::multiply_integers(weight.sizes().slice(2));
  for (size_t n = 0; n < plan.phases.size(); ++n) {
    if (plan.phases[n].empty()) continue;
    inputs[n].write = hip::PhaseWrite::Copy;
    inputs[n].result = result;
    inputs[n].channel_offset = tap_index(plan.phases[n], g) * per_group;
  }
  interleave(dx, plan, inputs, ChannelMap{per_group, taps * per_group});
  return dx;
}

}  // namespace bwdconv::ops
