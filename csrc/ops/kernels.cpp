#include "ops/kernels.h"

#include <atomic>

#include <c10/core/impl/VirtualGuardImpl.h>

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

namespace {

std::atomic<int> switch_bits{0};  // 1: on_host, 2: wide_index

}  // namespace

KernelSwitches kernel_switches() {
  const int bits = switch_bits.load();
  return {(bits & 1) != 0, (bits & 2) != 0};
}

void set_kernel_switches(KernelSwitches switches) {
  switch_bits.store((switches.on_host ? 1 : 0) | (switches.wide_index ? 2 : 0));
}

bool runs_kernels(const at::Tensor& t) { return !t.is_cpu() || kernel_switches().on_host; }

hip::NativeStream current_stream(const at::Tensor& t) {
  const c10::impl::VirtualGuardImpl guard(t.device().type());
  return guard.getStream(t.device()).native_handle();
}

void check_launch(hip::LaunchError error, const char* kernel) {
  TORCH_CHECK(error == nullptr, "bwdconv ", kernel, " kernel: ", error);
}

}  // namespace bwdconv::ops
