#include "ops/scatter.h"

#include <ATen/Parallel.h>

#include <cstring>
#include <vector>

#include "hip/scatter_index.h"
#include "ops/filter.h"
#ifdef BWDCONV_WITH_GPU_KERNELS
#include <ATen/cuda/CUDAContext.h>

#include "hip/scatter.h"
#endif

namespace bwdconv::ops {
namespace {

hip::TensorView view_of(const at::Tensor& t) {
  hip::TensorView view;
  view.dims = static_cast<int>(t.dim());
  for (int d = 0; d < view.dims; ++d) {
    view.sizes[d] = t.size(d);
    view.strides[d] = t.stride(d);
  }
  return view;
}

hip::ScatterParams scatter_params(const Plan& plan, const at::Tensor& grad_output,
                                  at::Tensor& buffer) {
  hip::ScatterParams p;
  p.src = grad_output.const_data_ptr();
  p.dst = buffer.mutable_data_ptr();
  p.src_view = view_of(grad_output);
  p.dst_view = view_of(buffer);
  for (int i = 0; i < plan.geometry.spatial_dims; ++i) {
    p.stride[i] = plan.geometry.stride[i];
    p.lead[i] = plan.scatter.dims[i].lead;
  }
  p.element_bytes = static_cast<int>(grad_output.element_size());
  return p;
}

// The CPU pass, row by row along the last dim, with the kernel's index math:
// a row whose outer coordinates hit an inserted zero is zero throughout.
template <typename Bits>
void scatter_on_cpu(const hip::ScatterParams& p) {
  const Bits* src = static_cast<const Bits*>(p.src);
  Bits* dst = static_cast<Bits*>(p.dst);
  const int last = p.dst_view.dims - 1;
  hip::TensorView rows = p.dst_view;  // every dim but the last
  rows.dims = last;
  int64_t row_count = 1;
  for (int d = 0; d < last; ++d) row_count *= rows.sizes[d];
  const int64_t length = p.dst_view.sizes[last];
  const int64_t dst_step = p.dst_view.strides[last], src_step = p.src_view.strides[last];
  const int64_t lead = p.lead[last - 2], stride = p.stride[last - 2];
  const int64_t src_length = p.src_view.sizes[last];
  at::parallel_for(0, row_count, 64, [&](int64_t begin, int64_t end) {
    int64_t coords[hip::kMaxTensorDims] = {};
    for (int64_t row = begin; row < end; ++row) {
      Bits* out = dst + hip::unravel_offset(row, rows, coords);
      coords[last] = lead;  // any position that holds a value in the last dim
      const int64_t base = src_length > 0 ? hip::scatter_source_offset(p, coords) : -1;
      for (int64_t j = 0; j < length; ++j) {
        const int64_t o = base >= 0 ? hip::scatter_source(j, lead, stride, src_length) : -1;
        out[j * dst_step] = o >= 0 ? src[base + o * src_step] : Bits{0};
      }
    }
  });
}

void fill_buffer(const hip::ScatterParams& p, const at::Tensor& buffer) {
  if (buffer.is_cuda()) {
#ifdef BWDCONV_WITH_GPU_KERNELS
    const auto error = hip::launch_scatter(p, at::cuda::getCurrentCUDAStream());
    TORCH_CHECK(error == kGpuSuccess, "bwdconv scatter kernel: ",
                gpu_error_string(error));
    return;
#else
    TORCH_CHECK(false, "bwdconv was built without its GPU kernels; the scatter strategy needs "
                       "them for GPU tensors");
#endif
  }
  switch (p.element_bytes) {
    case 2: return scatter_on_cpu<uint16_t>(p);
    case 4: return scatter_on_cpu<uint32_t>(p);
    case 8: return scatter_on_cpu<uint64_t>(p);
  }
  TORCH_CHECK(false, "scatter: unsupported element size ", p.element_bytes);
}

}  // namespace

at::Tensor scatter_grad_input(const Plan& plan, const at::Tensor& grad_output,
                              const at::Tensor& weight, const ConvParams& params,
                              at::MemoryFormat format) {
  const ConvGeometry& g = plan.geometry;
  std::vector<int64_t> buffer_sizes{g.batch, g.out_channels};
  for (int i = 0; i < g.spatial_dims; ++i) buffer_sizes.push_back(plan.scatter.dims[i].buffer);
  at::Tensor buffer = at::empty(buffer_sizes, grad_output.options().memory_format(format));
  fill_buffer(scatter_params(plan, grad_output, buffer), buffer);
  const std::vector<int64_t> ones(g.spatial_dims, 1), zeros(g.spatial_dims, 0);
  return at::convolution(buffer, adjoint_filter(weight, params.groups), std::nullopt, ones, zeros,
                         params.dilation, /*transposed=*/false, zeros, params.groups);
}

}  // namespace bwdconv::ops
