#include "ops/kernels.h"

#include <cstdlib>
#include <string>

#include <c10/core/impl/VirtualGuardImpl.h>

#include "hip/layout.h"

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

hip::NativeStream current_stream(const at::Tensor& t) {
  const c10::impl::VirtualGuardImpl guard(t.device().type());
  return guard.getStream(t.device()).native_handle();
}

void check_launch(hip::LaunchError error, const char* kernel) {
  TORCH_CHECK(error == nullptr, "bwdconv ", kernel, " kernel: ", error);
}

}  // namespace bwdconv::ops
