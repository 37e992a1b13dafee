#include "ops/precompiled.h"  // first, as the precompiled header must be

#include "ops/splitk.h"

#include <algorithm>
#include <vector>

#include "ops/aten.h"
#include "ops/geometry.h"

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
// in dim 0 (dw[k] = sum dy[n,o] x[n, o*s + k*d - p]). A window of padding
// alone still multiplies, so that a NaN or Inf in dy gives NaN as in aten.
at::Tensor partial_grad_weight(const ConvGeometry& g, const at::Tensor& grad_output,
                               const at::Tensor& input, std::pair<int64_t, int64_t> batch,
                               std::pair<int64_t, int64_t> rows, at::ScalarType partial) {
  const auto [lo, hi] = input_window(g, rows);
  const int64_t begin = std::clamp<int64_t>(lo, 0, g.input[0]);
  const int64_t end = std::clamp<int64_t>(hi, begin, g.input[0]);
  at::Tensor x = input.slice(0, batch.first, batch.second).slice(2, begin, end).to(partial);
  const int64_t before = std::clamp<int64_t>(-lo, 0, hi - lo);
  const int64_t after = (hi - lo) - before - (end - begin);
  if (before > 0 || after > 0) {
    std::vector<int64_t> pad(2 * g.spatial_dims, 0);  // last dim first, as constant_pad_nd wants
    pad[2 * (g.spatial_dims - 1)] = before;
    pad[2 * (g.spatial_dims - 1) + 1] = after;
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

// fp64 partials for float64, fp32 for every other dtype.
at::ScalarType partial_type(at::ScalarType dtype) {
  return dtype == at::kDouble ? at::kDouble : at::kFloat;
}

}  // namespace

// `format` is not needed: the caller restrides the result into it.
at::Tensor splitk_grad_weight(const Plan& plan, const at::Tensor& grad_output,
                              const at::Tensor& input, at::MemoryFormat /*format*/) {
  const ConvGeometry& g = plan.geometry;
  const SplitKGeometry& sk = plan.splitk;
  const at::ScalarType partial = partial_type(grad_output.scalar_type());
  at::Tensor sum = at::zeros(weight_sizes(g), grad_output.options().dtype(partial));
  for (int64_t b = 0; b < sk.batch_chunks; ++b) {
    const auto batch = chunk_range(g.batch, sk.batch_chunks, b);
    if (batch.first == batch.second) continue;
    for (int64_t c = 0; c < sk.space_chunks; ++c) {
      const auto rows = chunk_range(g.output[0], sk.space_chunks, c);
      if (rows.first == rows.second) continue;
      sum.add_(partial_grad_weight(g, grad_output, input, batch, rows, partial));
    }
  }
  return sum.to(grad_output.scalar_type());
}

}  // namespace bwdconv::ops
