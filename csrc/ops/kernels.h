// What the ops need to run a csrc/hip kernel: views of tensors, the launch
// (GPU) or the kernel's CPU twin, and a readable error when a launch fails.
#pragma once

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <type_traits>

#include "hip/index.h"
#include "hip/params.h"
#include "hip/portability.h"

namespace bwdconv::ops {

// Sizes and strides of `t` in logical order, walked in memory order.
hip::TensorView kernel_view(const at::Tensor& t);

// Whether CPU data movement that has a faster ATen form runs through the
// kernels' CPU twins instead (BWDCONV_CPU_KERNEL_TWINS=1, read once): for
// tests, which then cover the kernels' launch parameters and index math on
// any machine.
bool kernel_twins_on_cpu();

// The native handle of the stream torch is using on `t`'s device (c10's
// device-generic guard: the same code for CUDA and ROCm).
hip::NativeStream current_stream(const at::Tensor& t);

// Throws, naming the kernel, when a launch reported an error.
void check_launch(hip::LaunchError error, const char* kernel);

// Runs a csrc/hip kernel for tensors on `t`'s device: launch(target, stream)
// with target std::integral_constant<hip::Target, ...>, on the current stream
// of a GPU, or on the host grid for CPU tensors (portability.h, "host target").
// A build without GPU kernels reports so when a GPU tensor needs one
// (csrc/hip/without_device/).
template <typename Launch>
void run_kernel(const char* kernel, const at::Tensor& t, Launch&& launch) {
  using Host = std::integral_constant<hip::Target, hip::Target::host>;
  using Device = std::integral_constant<hip::Target, hip::Target::device>;
  if (t.is_cpu()) {
    check_launch(launch(Host{}, nullptr), kernel);
  } else {
    check_launch(launch(Device{}, current_stream(t)), kernel);
  }
}

// Calls body(coords, offset) for every element of `view` in walk order, in
// parallel over contiguous runs: the CPU twin of a grid-stride kernel with
// index type Index (hip/index.h, "divide").
template <typename Index, typename Body>
void for_each_element(const hip::TensorView& view, Body&& body) {
  at::parallel_for(0, hip::element_count(view), 16384, [&](int64_t begin, int64_t end) {
    int64_t coords[hip::kMaxTensorDims] = {};
    int64_t offset = hip::unravel_offset<Index>(begin, view, coords);
    for (int64_t linear = begin; linear < end; ++linear) {
      body(coords, offset);
      if (linear + 1 < end) offset = hip::advance_coords(view, coords, offset);
    }
  });
}

}  // namespace bwdconv::ops
