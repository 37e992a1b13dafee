#include "ops/precompiled.h"  // first, as the precompiled header must be

#include "ops/splitk.h"

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <vector>

#include <ATen/TensorUtils.h>

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

// The units the chunks are counted for (SMs, CUs, or host threads).
int64_t device_units(c10::Device device) {
  return device.is_cpu() ? hip::splitk_units<hip::Target::host>(0)
                         : hip::splitk_units<hip::Target::device>(device.index());
}

at::ScalarType partial_type(at::ScalarType dtype) {
  return dtype == at::kDouble ? at::kDouble : at::kFloat;
}

// What the GEMM multiplies: the tensors' dtype where it widens the results
// itself, else fp32 (fp64) copies.
at::ScalarType operand_type(c10::Device device, at::ScalarType dtype) {
  if (dtype == partial_type(dtype) || !device.is_cuda()) return partial_type(dtype);
#if defined(USE_ROCM)
  if (at::globalContext().blasPreferredBackend() == at::BlasBackend::Ck) return at::kFloat;
#endif
  return dtype;
}

SplitKGemmLimits limits_from_environment() {
  SplitKGemmLimits limits;
  if (const char* value = std::getenv("BWDCONV_SPLITK_STAGING_BYTES")) {
    char* end = nullptr;
    const long long bytes = std::strtoll(value, &end, 10);
    TORCH_CHECK(end != value && *end == '\0' && bytes > 0,
                "BWDCONV_SPLITK_STAGING_BYTES must be a positive number of bytes, not '", value,
                "'");
    limits.staging_bytes = bytes;
    limits.staging_bytes_per_unit = 0;
  }
  return limits;
}

// out (+)= a @ b for one batch of matrices, fp32 (fp64) results.
void gemm(const at::Tensor& a, const at::Tensor& b, at::Tensor out, bool accumulate) {
  if (a.scalar_type() != out.scalar_type()) {
    if (accumulate) {
      at::baddbmm_out(out, out, a, b, out.scalar_type());
    } else {
      at::bmm_out(out, a, b, out.scalar_type());
    }
  } else if (accumulate) {
    out.baddbmm_(a, b);
  } else {
    at::bmm_out(out, a, b);
  }
}

// `t` with its first `count` dims merged into one, when its strides allow a view.
std::optional<at::Tensor> merged_leading(const at::Tensor& t, int64_t count) {
  std::vector<int64_t> shape{1};
  for (int64_t d = 0; d < count; ++d) shape[0] *= t.size(d);
  for (int64_t d = count; d < t.dim(); ++d) shape.push_back(t.size(d));
  const auto strides = at::detail::computeStride(t.sizes(), t.strides(), shape);
  if (!strides) return std::nullopt;
  return t.as_strided(shape, *strides, t.storage_offset());
}

// out[i...] (+)= a[i...] @ b[i...] over every leading (batch) index: one
// batched GEMM where the views of a, b and out merge their batch dims, else
// one per index of the shortest batch dim.
void batched_products(const at::Tensor& a, const at::Tensor& b, const at::Tensor& out,
                      bool accumulate) {
  const int64_t batch_dims = a.dim() - 2;
  const auto merged_a = merged_leading(a, batch_dims), merged_b = merged_leading(b, batch_dims),
             merged_out = merged_leading(out, batch_dims);
  if (merged_a && merged_b && merged_out) {
    gemm(*merged_a, *merged_b, *merged_out, accumulate);
    return;
  }
  int64_t shortest = 0;
  for (int64_t d = 1; d < batch_dims; ++d) {
    if (a.size(d) < a.size(shortest)) shortest = d;
  }
  for (int64_t i = 0; i < a.size(shortest); ++i) {
    batched_products(a.select(shortest, i), b.select(shortest, i), out.select(shortest, i),
                     accumulate);
  }
}

// The boxes one step stages and multiplies: batch row c_n * b + step of
// chunks c_n in [0, batch_chunks), output rows [row_offset, row_offset + rows)
// of first-dim chunks c_s in [s_begin, s_end).
struct StepGroup {
  int64_t step, batch_chunks, s_begin, s_end, row_offset, rows;
};

// The kernel path (docs/DESIGN.md, "splitk"): staged input windows, products
// on the vendor GEMM into fp32 (fp64) partials, the in-order reduce kernel.
class GemmSplitK {
 public:
  GemmSplitK(const Plan& plan, const at::Tensor& grad_output, const at::Tensor& input,
             at::ScalarType partial)
      : g_(plan.geometry),
        dy_(grad_output),
        partial_(partial),
        operand_(operand_type(grad_output.device(), grad_output.scalar_type())),
        columns_last_(input.dim() > 3 &&
                      input.suggest_memory_format() != at::MemoryFormat::Contiguous),
        layout_(splitk_kernel_layout(g_, grad_output.device(), grad_output.scalar_type())),
        x_(padded(input)) {
    for (int d = 1; d < g_.spatial_dims; ++d) row_positions_ *= g_.output[d];
    staged_columns_ = g_.in_channels_per_group() * layout_.staged_taps;
  }

  at::Tensor run() {
    partials_ = at::empty({layout_.chunks(), g_.out_channels, layout_.offset_taps, staged_columns_},
                          dy_.options().dtype(partial_));
    const int64_t b = layout_.batch_per_chunk, rows = layout_.rows_per_chunk;
    const int64_t full = g_.output[0] / rows, tail = g_.output[0] - full * rows;
    for (int64_t step = 0; step < b; ++step) {
      const int64_t batch_chunks = (g_.batch - step + b - 1) / b;  // those with this row
      for (int64_t offset = 0; offset < rows; offset += layout_.step_rows) {
        const int64_t step_rows = std::min(layout_.step_rows, rows - offset);
        multiply({step, batch_chunks, 0, full, offset, step_rows});
        if (offset < tail) {
          multiply({step, batch_chunks, full, full + 1, offset,
                    std::min(layout_.step_rows, tail - offset)});
        }
      }
    }
    return reduce();
  }

 private:
  // The input zero-padded once where the windows leave it (a view of it
  // where they do not): position i of a spatial dim is row i + p.
  at::Tensor padded(const at::Tensor& x) const {
    std::vector<int64_t> pad(2 * g_.spatial_dims);  // last dim first; negative crops
    bool pads = false;
    for (int d = 0; d < g_.spatial_dims; ++d) {
      const int64_t end = (g_.output[d] - 1) * g_.stride[d] +
                          g_.dilation[d] * (g_.filter[d] - 1) - g_.padding[d] + 1;
      const int64_t at = 2 * (g_.spatial_dims - 1 - d);
      pad[at] = g_.padding[d];
      pad[at + 1] = end - g_.input[d];
      pads = pads || g_.padding[d] > 0;
    }
    return pads ? at::constant_pad_nd(x, pad, 0) : x;
  }

  // The staged columns of a step group, dims in storage order
  //   NCHW input:          [n, s, group, c, staged taps..., staged rows, other output dims...]
  //   channels_last input: [n, s, staged rows, other output dims..., group, staged taps..., c]
  // copied from the padded input in one strided copy.
  at::Tensor stage(const StepGroup& c) const {
    const int dims = g_.spatial_dims;
    const bool by_offset = layout_.offset_taps > 1;
    const int64_t channels = g_.in_channels_per_group(), b = layout_.batch_per_chunk;
    const int64_t row_step = g_.stride[0] * x_.stride(2);
    // Logical order: n, s, group, c, staged taps, staged positions.
    std::vector<int64_t> sizes{c.batch_chunks, c.s_end - c.s_begin, g_.groups, channels};
    std::vector<int64_t> strides{b * x_.stride(0), layout_.rows_per_chunk * row_step,
                                 channels * x_.stride(1), x_.stride(1)};
    for (int d = by_offset ? 1 : 0; d < dims; ++d) {
      sizes.push_back(g_.filter[d]);
      strides.push_back(g_.dilation[d] * x_.stride(d + 2));
    }
    const int64_t taps_end = static_cast<int64_t>(sizes.size());
    sizes.push_back(c.rows + layout_.halo_rows);
    strides.push_back(row_step);
    for (int d = 1; d < dims; ++d) {
      sizes.push_back(g_.output[d]);
      strides.push_back(g_.stride[d] * x_.stride(d + 2));
    }
    const int64_t first_row = c.s_begin * layout_.rows_per_chunk + c.row_offset;
    const at::Tensor unfolded = x_.as_strided(
        sizes, strides, x_.storage_offset() + c.step * x_.stride(0) + first_row * row_step);

    // Storage order as a permutation of the logical dims.
    std::vector<int64_t> order{0, 1};
    const int64_t logical = static_cast<int64_t>(sizes.size());
    if (columns_last_) {
      for (int64_t d = taps_end; d < logical; ++d) order.push_back(d);
      order.push_back(2);
      for (int64_t d = 4; d < taps_end; ++d) order.push_back(d);
      order.push_back(3);
    } else {
      for (int64_t d = 2; d < logical; ++d) order.push_back(d);
    }
    std::vector<int64_t> storage_sizes, inverse(logical);
    for (int64_t i = 0; i < logical; ++i) {
      storage_sizes.push_back(sizes[order[i]]);
      inverse[order[i]] = i;
    }
    at::Tensor staged = at::empty(storage_sizes, x_.options().dtype(operand_));
    staged.permute(inverse).copy_(unfolded);
    return staged;
  }

  // The step group's partials (+)= its boxes' products, one batched GEMM per
  // offset tap.
  void multiply(const StepGroup& c) {
    const at::Tensor staged = stage(c);
    const int64_t n = c.batch_chunks, s = c.s_end - c.s_begin;
    const int64_t groups = g_.groups, m = g_.out_channels_per_group();
    const int64_t positions = c.rows * row_positions_;
    const int64_t staged_positions = (c.rows + layout_.halo_rows) * row_positions_;
    // B: [n, s, group, staged positions, columns]
    const at::Tensor columns =
        columns_last_
            ? staged.view({n, s, staged_positions, groups, staged_columns_}).permute({0, 1, 3, 2, 4})
            : staged.view({n, s, groups, staged_columns_, staged_positions}).transpose(3, 4);
    // A: [n, s, group, m, positions] of grad_output (a view unless its
    // output dims cannot merge into one).
    const int64_t b = layout_.batch_per_chunk;
    std::vector<int64_t> sizes{n, s, g_.out_channels, c.rows};
    std::vector<int64_t> strides{b * dy_.stride(0), layout_.rows_per_chunk * dy_.stride(2),
                                 dy_.stride(1), dy_.stride(2)};
    for (int d = 1; d < g_.spatial_dims; ++d) {
      sizes.push_back(g_.output[d]);
      strides.push_back(dy_.stride(d + 2));
    }
    const int64_t first_row = c.s_begin * layout_.rows_per_chunk + c.row_offset;
    at::Tensor dy = dy_.as_strided(sizes, strides,
                                   dy_.storage_offset() + c.step * dy_.stride(0) +
                                       first_row * dy_.stride(2))
                        .flatten(3)
                        .unflatten(2, {groups, m});
    if (dy.scalar_type() != operand_) dy = dy.to(operand_);
    const at::Tensor out_chunks =
        partials_.view({layout_.batch_chunks, layout_.space_chunks, groups, m,
                        layout_.offset_taps, staged_columns_})
            .slice(0, 0, n)
            .slice(1, c.s_begin, c.s_end);
    const bool accumulate = c.step > 0 || c.row_offset > 0;
    for (int64_t t = 0; t < layout_.offset_taps; ++t) {
      const at::Tensor b_t = columns.narrow(3, t * g_.dilation[0] * row_positions_, positions);
      batched_products(dy, b_t, out_chunks.select(4, t), accumulate);
    }
  }

  // The in-order reduce, then the weight gradient as a view of its result.
  at::Tensor reduce() const {
    // Result dims: out channel, the first dim's tap when by offset, then the
    // staged columns in their storage order.
    std::vector<int64_t> sizes{g_.out_channels};
    std::vector<int> names{-2};  // -2: out channel, -1: in channel, d: tap of spatial dim d
    const bool taps_by_offset = layout_.offset_taps > 1;
    if (taps_by_offset) {
      sizes.push_back(g_.filter[0]);
      names.push_back(0);
    }
    const int first_staged = taps_by_offset ? 1 : 0;
    if (!columns_last_) {
      sizes.push_back(g_.in_channels_per_group());
      names.push_back(-1);
    }
    for (int d = first_staged; d < g_.spatial_dims; ++d) {
      sizes.push_back(g_.filter[d]);
      names.push_back(d);
    }
    if (columns_last_) {
      sizes.push_back(g_.in_channels_per_group());
      names.push_back(-1);
    }
    at::Tensor result = at::empty(sizes, dy_.options());
    hip::SplitKParams p;
    p.partials = partials_.const_data_ptr();
    p.grad_weight = result.mutable_data_ptr();
    p.elements = result.numel();
    p.chunks = layout_.chunks();
    p.element = static_cast<int>(element_type(result.scalar_type(), "splitk"));
    run_kernel("splitk", dy_, [&](auto target, hip::NativeStream stream) {
      return hip::launch_splitk_reduce<decltype(target)::value>(p, stream);
    });
    std::vector<int64_t> logical;  // [out channel, in channel, taps...]
    for (int name = -2; name < g_.spatial_dims; ++name) {
      logical.push_back(std::find(names.begin(), names.end(), name) - names.begin());
    }
    return result.permute(logical);
  }

  const ConvGeometry& g_;
  const at::Tensor dy_;
  const at::ScalarType partial_, operand_;
  const bool columns_last_;
  const SplitKGemmLayout layout_;
  const at::Tensor x_;
  int64_t row_positions_ = 1, staged_columns_ = 1;
  at::Tensor partials_;
};

}  // namespace

SplitKGemmLayout splitk_kernel_layout(const ConvGeometry& geometry, c10::Device device,
                                      at::ScalarType dtype) {
  return make_splitk_gemm_layout(geometry, device_units(device),
                                 at::elementSize(operand_type(device, dtype)),
                                 at::elementSize(partial_type(dtype)), limits_from_environment());
}

// `format` is not needed: the caller restrides the result into it.
at::Tensor splitk_grad_weight(const Plan& plan, const at::Tensor& grad_output,
                              const at::Tensor& input, at::MemoryFormat /*format*/) {
  const ConvGeometry& g = plan.geometry;
  const SplitKGeometry& sk = plan.splitk;
  const at::ScalarType partial = partial_type(grad_output.scalar_type());
  if (runs_kernels(grad_output)) return GemmSplitK(plan, grad_output, input, partial).run();
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
