#include "ops/scatter.h"

#include <algorithm>
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

// The kernel's CPU twin: one element at a time, through the kernel's index math.
template <typename Bits, typename Index>
void twin_walk(const hip::ScatterParams& p) {
  const Bits* src = static_cast<const Bits*>(p.src);
  Bits* dst = static_cast<Bits*>(p.dst);
  for_each_element<Index>(p.dst_view, [&](const int64_t* coords, int64_t offset) {
    const int64_t source = hip::scatter_source_offset<Index>(p, coords);
    dst[offset] = source >= 0 ? src[source] : Bits{};
  });
}

// On the CPU: zeros, then one strided ATen copy (vectorised and threaded by
// ATen) of the grad_output values that land inside the buffer (dy[o] at
// lead + o*s; a negative lead or trail crops dy).
void scatter_on_cpu(const Plan& plan, const at::Tensor& grad_output, at::Tensor& buffer) {
  buffer.zero_();
  at::Tensor slots = buffer, values = grad_output;
  for (int i = 0; i < plan.geometry.spatial_dims; ++i) {
    const ScatterDim& dim = plan.scatter.dims[i];
    const int64_t s = plan.geometry.stride[i], outputs = grad_output.size(2 + i);
    const int64_t first = dim.lead < 0 ? (-dim.lead + s - 1) / s : 0;  // first o with lead + o*s >= 0
    const int64_t end = std::min(outputs, (dim.buffer - dim.lead + s - 1) / s);  // past the last
    const int64_t count = std::max<int64_t>(end - first, 0);
    if (count == 0) return;
    const int64_t start = dim.lead + first * s;
    slots = slots.slice(2 + i, start, start + (count - 1) * s + 1, s);
    values = values.narrow(2 + i, first, count);
  }
  slots.copy_(values);
}

// The kernel on a GPU, or its CPU twin (BWDCONV_CPU_KERNEL_TWINS=1).
void fill_buffer(const hip::ScatterParams& p, const at::Tensor& buffer) {
  if (!buffer.is_cpu()) {
    run_kernel("scatter", buffer, [&](auto target, hip::NativeStream stream) {
      return hip::launch_scatter<decltype(target)::value>(p, stream);
    });
    return;
  }
  const bool narrow = hip::scatter_divides_narrow(p);
  const bool known = hip::visit_walk(p.element_bytes, narrow, [&](auto bits, auto index) {
    twin_walk<decltype(bits), decltype(index)>(p);
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
  if (buffer.is_cuda() || kernel_twins_on_cpu()) {
    hip::ScatterParams p = scatter_params(plan, grad_output, buffer);
    pack_channels(p);
    fill_buffer(p, buffer);
  } else {
    scatter_on_cpu(plan, grad_output, buffer);
  }
  const std::vector<int64_t> ones(g.spatial_dims, 1), zeros(g.spatial_dims, 0);
  return at::convolution(buffer, adjoint_filter(weight, params.groups), std::nullopt, ones, zeros,
                         params.dilation, /*transposed=*/false, zeros, params.groups);
}

}  // namespace bwdconv::ops
