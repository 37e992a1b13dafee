#include "ops/splitk.h"

#include <vector>

#include "hip/element.h"
#include "ops/aten.h"
#include "ops/geometry.h"
#include "ops/kernels.h"
#include "hip/splitk.h"

namespace bwdconv::ops {
namespace {

// [begin, end) of chunk `index` when `length` is cut into `chunks` near-equal parts.
std::pair<int64_t, int64_t> chunk_range(int64_t length, int64_t chunks, int64_t index) {
  return {length * index / chunks, length * (index + 1) / chunks};
}

// Input rows [lo, hi) of spatial dim 0 read by output rows [begin, end):
// o*s + k*d - p for o in the rows and k in the filter.
std::pair<int64_t, int64_t> input_window(const ConvGeometry& g, std::pair<int64_t, int64_t> rows) {
  const int64_t s = g.stride[0], p = g.padding[0];
  return {rows.first * s - p, (rows.second - 1) * s - p + g.dilation[0] * (g.filter[0] - 1) + 1};
}

// The partial weight gradient of output rows [o_begin, o_end) of spatial dim 0
// for batch rows [n_begin, n_end): the input rows those outputs read,
// zero-padded where they fall outside the input, convolved without padding
// in dim 0 (dw[k] = sum dy[n,o] x[n, o*s + k*d - p]). The window must
// overlap the input.
at::Tensor partial_grad_weight(const ConvGeometry& g, const at::Tensor& grad_output,
                               const at::Tensor& input, std::pair<int64_t, int64_t> batch,
                               std::pair<int64_t, int64_t> rows, at::ScalarType partial) {
  const auto [lo, hi] = input_window(g, rows);
  at::Tensor x = input.slice(0, batch.first, batch.second)
                     .slice(2, std::max<int64_t>(lo, 0), std::min(hi, g.input[0]))
                     .to(partial);
  if (lo < 0 || hi > g.input[0]) {
    std::vector<int64_t> pad(2 * g.spatial_dims, 0);  // last dim first, as constant_pad_nd wants
    pad[2 * (g.spatial_dims - 1)] = std::max<int64_t>(0, -lo);
    pad[2 * (g.spatial_dims - 1) + 1] = std::max<int64_t>(0, hi - g.input[0]);
    x = at::constant_pad_nd(x, pad, 0);
  }
  const at::Tensor dy =
      grad_output.slice(0, batch.first, batch.second).slice(2, rows.first, rows.second).to(partial);
  const ConvParams params = geometry_params(g);
  std::vector<int64_t> padding(params.padding.begin(), params.padding.end());
  padding[0] = 0;
  return aten_weight_gradient(dy, x, weight_sizes(g),
                              {params.stride, padding, params.dilation, params.groups});
}

hip::ElementType element_type(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat: return hip::ElementType::Float32;
    case at::kDouble: return hip::ElementType::Float64;
    case at::kHalf: return hip::ElementType::Float16;
    case at::kBFloat16: return hip::ElementType::BFloat16;
    default: TORCH_CHECK(false, "bwdconv splitk: unsupported dtype ", dtype,
                         " (float32, float64, float16 and bfloat16 are supported)");
  }
}

hip::SplitKParams kernel_params(const Plan& plan, const at::Tensor& grad_output,
                                const at::Tensor& input, const at::Tensor& partials,
                                at::Tensor& grad_weight) {
  const ConvGeometry& g = plan.geometry;
  hip::SplitKParams p;
  p.grad_output = grad_output.const_data_ptr();
  p.input = input.const_data_ptr();
  p.partials = partials.mutable_data_ptr();
  p.grad_weight = grad_weight.mutable_data_ptr();
  p.grad_output_view = kernel_view(grad_output);
  p.input_view = kernel_view(input);
  p.spatial_dims = g.spatial_dims;
  for (int i = 0; i < g.spatial_dims; ++i) {
    p.filter[i] = g.filter[i];
    p.stride[i] = g.stride[i];
    p.padding[i] = g.padding[i];
    p.dilation[i] = g.dilation[i];
    p.taps *= g.filter[i];
  }
  p.groups = g.groups;
  p.out_per_group = g.out_channels_per_group();
  p.in_per_group = g.in_channels_per_group();
  p.columns = p.in_per_group * p.taps;
  p.reduction = grad_output.numel() / std::max<int64_t>(g.out_channels, 1);
  p.chunks = plan.splitk.chunks();
  p.element = static_cast<int>(element_type(grad_output.scalar_type()));
  return p;
}

// The csrc/hip kernels (GPUs, or the host grid when switched on): fp32 (fp64)
// partials per chunk, then an in-order reduce and cast; everything stays on
// the stream, nothing synchronises.
at::Tensor splitk_with_kernels(const Plan& plan, const at::Tensor& grad_output,
                               const at::Tensor& input, at::IntArrayRef weight_sizes,
                               at::ScalarType partial) {
  at::Tensor grad_weight = at::empty(weight_sizes, grad_output.options());
  const at::Tensor partials =
      at::empty({plan.splitk.chunks(), grad_weight.numel()}, grad_output.options().dtype(partial));
  const hip::SplitKParams p = kernel_params(plan, grad_output, input, partials, grad_weight);
  run_kernel("splitk", grad_output, [&](auto target, hip::NativeStream stream) {
    return hip::launch_splitk<decltype(target)::value>(p, stream);
  });
  return grad_weight;
}

}  // namespace

// `format` is not needed: the caller restrides the result into it.
at::Tensor splitk_grad_weight(const Plan& plan, const at::Tensor& grad_output,
                              const at::Tensor& input, at::MemoryFormat /*format*/) {
  const ConvGeometry& g = plan.geometry;
  const SplitKGeometry& sk = plan.splitk;
  const at::ScalarType partial =
      grad_output.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  if (runs_kernels(grad_output)) {
    return splitk_with_kernels(plan, grad_output, input, weight_sizes(g), partial);
  }
  at::Tensor sum = at::zeros(weight_sizes(g), grad_output.options().dtype(partial));
  for (int64_t b = 0; b < sk.batch_chunks; ++b) {
    const auto batch = chunk_range(g.batch, sk.batch_chunks, b);
    if (batch.first == batch.second) continue;
    for (int64_t c = 0; c < sk.space_chunks; ++c) {
      const auto rows = chunk_range(g.output[0], sk.space_chunks, c);
      const auto [lo, hi] = input_window(g, rows);
      // Empty rows, or rows that read only padding, add nothing.
      if (rows.first == rows.second || hi <= 0 || lo >= g.input[0]) continue;
      sum.add_(partial_grad_weight(g, grad_output, input, batch, rows, partial));
    }
  }
  return sum.to(grad_output.scalar_type());
}

}  // namespace bwdconv::ops
