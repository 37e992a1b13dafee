#include "ops/kernels.h"

#include <cstdlib>
#include <string>

#include "hip/layout.h"
#ifdef BWDCONV_WITH_GPU_KERNELS
#include <ATen/cuda/CUDAContext.h>
#endif

namespace bwdconv::ops {

hip::TensorView kernel_view(const at::Tensor& t) {
  hip::TensorView view;
  view.dims = static_cast<int>(t.dim());
  for (int d = 0; d < view.dims; ++d) {
    view.sizes[d] = t.size(d);
    view.strides[d] = t.stride(d);
  }
  hip::walk_in_memory_order(view);
  hip::set_size_steps(view);
  return view;
}

bool kernel_twins_on_cpu() {
  static const bool twins = [] {
    const char* value = std::getenv("BWDCONV_CPU_KERNEL_TWINS");
    return value != nullptr && std::string(value) == "1";
  }();
  return twins;
}

void require_gpu_kernels(const char* kernel) {
#ifndef BWDCONV_WITH_GPU_KERNELS
  TORCH_CHECK(false, "bwdconv was built without its GPU kernels; the ", kernel,
              " kernel is needed for GPU tensors (rebuild with nvcc or hipcc available)");
#else
  (void)kernel;
#endif
}

#ifdef BWDCONV_WITH_GPU_KERNELS
GpuStream current_stream() { return at::cuda::getCurrentCUDAStream(); }

void check_launch(GpuError error, const char* kernel) {
  TORCH_CHECK(error == kGpuSuccess, "bwdconv ", kernel, " kernel: ", gpu_error_string(error));
}
#endif

}  // namespace bwdconv::ops
