#include "ops/scatter.h"

#include <vector>

#include "hip/bits.h"
#include "hip/launch.h"
#include "hip/layout.h"
#include "hip/scatter_index.h"
#include "ops/filter.h"
#include "ops/kernels.h"
#include "hip/scatter.h"

namespace bwdconv::ops {
namespace {

hip::ScatterParams scatter_params(const Plan& plan, const at::Tensor& grad_output,
                                  at::Tensor& buffer) {
  hip::ScatterParams p;
  p.src = grad_output.const_data_ptr();
  p.dst = buffer.mutable_data_ptr();
  p.src_view = kernel_view(grad_output);
  p.dst_view = kernel_view(buffer);
  for (int i = 0; i < plan.geometry.spatial_dims; ++i) {
    p.stride[i] = hip::make_step(plan.geometry.stride[i]);
    p.lead[i] = plan.scatter.dims[i].lead;
  }
  p.element_bytes = static_cast<int>(grad_output.element_size());
  return p;
}

// Moves k channels per element when both tensors keep their channels
// contiguous and the sizes, strides and addresses allow it.
void pack_channels(hip::ScatterParams& p) {
  if (p.src_view.strides[1] != 1 || p.dst_view.strides[1] != 1) return;
  std::vector<int64_t> multiples{p.dst_view.sizes[1]};
  for (int d = 0; d < p.dst_view.dims; ++d) {
    if (d == 1) continue;
    multiples.push_back(p.src_view.strides[d]);
    multiples.push_back(p.dst_view.strides[d]);
  }
  const int64_t k = hip::packet_elements(
      p.element_bytes, multiples,
      {reinterpret_cast<uintptr_t>(p.src), reinterpret_cast<uintptr_t>(p.dst)});
  if (k == 1) return;
  hip::widen_channels(p.src_view, k);
  hip::widen_channels(p.dst_view, k);
  p.element_bytes *= static_cast<int>(k);
}

template <typename Bits, typename Index>
void scatter_on_cpu(const hip::ScatterParams& p) {
  const Bits* src = static_cast<const Bits*>(p.src);
  Bits* dst = static_cast<Bits*>(p.dst);
  for_each_element<Index>(p.dst_view, [&](const int64_t* coords, int64_t offset) {
    const int64_t source = hip::scatter_source_offset<Index>(p, coords);
    dst[offset] = source >= 0 ? src[source] : Bits{};
  });
}

void fill_buffer(const hip::ScatterParams& p, const at::Tensor& buffer) {
  if (!buffer.is_cpu()) {
    run_kernel("scatter", buffer, [&](auto target, hip::NativeStream stream) {
      return hip::launch_scatter<decltype(target)::value>(p, stream);
    });
    return;
  }
  const bool narrow = hip::scatter_divides_narrow(p);
  const bool known = hip::visit_walk(p.element_bytes, narrow, [&](auto bits, auto index) {
    scatter_on_cpu<decltype(bits), decltype(index)>(p);
  });
  TORCH_CHECK(known, "bwdconv scatter: unsupported element size ", p.element_bytes);
}

}  // namespace

at::Tensor scatter_grad_input(const Plan& plan, const at::Tensor& grad_output,
                              const at::Tensor& weight, const ConvParams& params,
                              at::MemoryFormat format) {
  const ConvGeometry& g = plan.geometry;
  std::vector<int64_t> buffer_sizes{g.batch, g.out_channels};
  for (int i = 0; i < g.spatial_dims; ++i) buffer_sizes.push_back(plan.scatter.dims[i].buffer);
  at::Tensor buffer = at::empty(buffer_sizes, grad_output.options().memory_format(format));
  hip::ScatterParams p = scatter_params(plan, grad_output, buffer);
  pack_channels(p);
  fill_buffer(p, buffer);
  const std::vector<int64_t> ones(g.spatial_dims, 1), zeros(g.spatial_dims, 0);
  return at::convolution(buffer, adjoint_filter(weight, params.groups), std::nullopt, ones, zeros,
                         params.dilation, /*transposed=*/false, zeros, params.groups);
}

}  // namespace bwdconv::ops
