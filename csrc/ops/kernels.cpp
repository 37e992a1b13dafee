#include "ops/precompiled.h"  // first, as the precompiled header must be

#include "ops/kernels.h"

#include <atomic>

#if defined(BWDCONV_WITH_GPU_KERNELS)
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGraphsC10Utils.h>
#endif

namespace bwdconv::ops {

hip::TensorView kernel_view(const at::Tensor& t) {
  hip::TensorView view;
  view.dims = static_cast<int>(t.dim());
  for (int d = 0; d < view.dims; ++d) {
    view.sizes[d] = t.size(d);
    view.strides[d] = t.stride(d);
  }
  return view;
}

hip::ElementType element_type(at::ScalarType dtype, const char* kernel) {
  switch (dtype) {
    case at::kFloat: return hip::ElementType::Float32;
    case at::kDouble: return hip::ElementType::Float64;
    case at::kHalf: return hip::ElementType::Float16;
    case at::kBFloat16: return hip::ElementType::BFloat16;
    default: TORCH_CHECK(false, "bwdconv ", kernel, ": unsupported dtype ", dtype,
                         " (float32, float64, float16 and bfloat16 are supported)");
  }
}

namespace {

std::atomic<bool> on_host_grid{false};

}  // namespace

bool kernels_on_host() { return on_host_grid.load(); }

void set_kernels_on_host(bool on_host) { on_host_grid = on_host; }

bool runs_kernels(const at::Tensor& t) { return !t.is_cpu() || kernels_on_host(); }

hip::NativeStream current_stream(const at::Tensor& t) {
#if defined(BWDCONV_WITH_GPU_KERNELS)
  // Every supported torch has this getter (c10::Stream::native_handle, the
  // device-generic route, is missing from older ones); in a ROCm build
  // torch's hipify turns it into HIP's, whose stream() is the hipStream_t.
  return at::cuda::getCurrentCUDAStream(t.device().index()).stream();
#else
  // No device launcher of this build takes a stream: each reports that the
  // kernels are missing (BWDCONV_TARGET_FUNCTION, csrc/hip/portability.h).
  static_cast<void>(t);
  return nullptr;
#endif
}

bool stream_capturing(const at::Tensor& t) {
  if (t.is_cpu()) return false;
#if defined(BWDCONV_WITH_GPU_KERNELS)
  const c10::DeviceGuard on_device(t.device());
  return c10::cuda::currentStreamCaptureStatusMayInitCtx() != c10::cuda::CaptureStatus::None;
#else
  return true;
#endif
}

void check_launch(hip::LaunchError error, const char* kernel) {
  TORCH_CHECK(error == nullptr, "bwdconv ", kernel, " kernel: ", error);
}

}  // namespace bwdconv::ops
