#include "ops/precompiled.h"  // first, as the precompiled header must be

#include "ops/scatter.h"

#include <algorithm>
#include <vector>

#include "hip/layout.h"
#include "ops/aten.h"
#include "ops/filter.h"
#include "ops/geometry.h"
#include "ops/kernels.h"
#include "hip/scatter.h"

namespace bwdconv::ops {
namespace {

// The kernel's row walk over the buffer (hip/layout.h, make_scatter_walk);
// false where the buffer's positions pass the walk's 32 bits.
bool scatter_params(const Plan& plan, const at::Tensor& grad_output, at::Tensor& buffer,
                    hip::ScatterParams* p) {
  p->src = grad_output.const_data_ptr();
  p->dst = buffer.mutable_data_ptr();
  int64_t lead[kMaxSpatialDims] = {};
  for (int i = 0; i < plan.geometry.spatial_dims; ++i) lead[i] = plan.scatter.dims[i].lead;
  if (!hip::make_scatter_walk(kernel_view(grad_output), kernel_view(buffer),
                              plan.geometry.stride.data(), lead,
                              static_cast<int>(grad_output.element_size()), p)) {
    return false;
  }
  p->wide_offsets = p->wide_offsets || wide_offsets_for_tests();
  return true;
}

// Zeros, then one strided ATen copy (vectorised and threaded by ATen) of the
// grad_output values that land inside the buffer (dy[o] at lead + o*s; a
// negative lead or trail crops dy). On the CPU, and on a GPU for a buffer
// whose positions pass the kernel's 32 bits.
void scatter_with_copies(const Plan& plan, const at::Tensor& grad_output, at::Tensor& buffer) {
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

// The kernel on a GPU, or on the host grid when switched on (kernels.h),
// where its walk fits; ATen's copies otherwise.
void fill_buffer(const Plan& plan, const at::Tensor& grad_output, at::Tensor& buffer) {
  hip::ScatterParams p;
  if (!runs_kernels(buffer) || !scatter_params(plan, grad_output, buffer, &p)) {
    scatter_with_copies(plan, grad_output, buffer);
    return;
  }
  run_kernel("scatter", buffer, [&](auto target, hip::NativeStream stream) {
    return hip::launch_scatter<decltype(target)::value>(p, stream);
  });
}

}  // namespace

at::Tensor scatter_grad_input(const Plan& plan, const at::Tensor& grad_output,
                              const at::Tensor& weight, at::MemoryFormat format) {
  const ConvGeometry& g = plan.geometry;
  std::vector<int64_t> buffer_sizes{g.batch, g.out_channels};
  for (int i = 0; i < g.spatial_dims; ++i) buffer_sizes.push_back(plan.scatter.dims[i].buffer);
  at::Tensor buffer = at::empty(buffer_sizes, grad_output.options().memory_format(format));
  fill_buffer(plan, grad_output, buffer);
  const std::vector<int64_t> zeros(g.spatial_dims, 0);
  return stride1_convolution(buffer, adjoint_filter(weight, g.groups), zeros,
                             geometry_params(g).dilation, g.groups);
}

}  // namespace bwdconv::ops
