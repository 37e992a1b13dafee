// What the ops need to run a csrc/hip kernel: views of tensors, the launch on
// a GPU stream or on the host grid, and a readable error when a launch fails;
// and the interleave that phase, phase_stacked and swap1x1 end with.
#pragma once

#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>

#include <type_traits>
#include <vector>

#include "dispatch/plan.h"
#include "hip/params.h"
#include "hip/portability.h"

namespace bwdconv::ops {

// Sizes and strides of `t` in logical order.
hip::TensorView kernel_view(const at::Tensor& t);

// Whether CPU tensors run the csrc/hip kernels on the host grid instead of
// ATen (bwdconv.kernels_on_host).
bool kernels_on_host();
void set_kernels_on_host(bool on_host);

// Whether the kernels use their 64-bit element offsets on any shape: set by
// the tests (bwdconv._C._testing.set_wide_offsets), which prove that path
// on small tensors.
bool wide_offsets_for_tests();

// Whether the csrc/hip kernels serve tensors on `t`'s device: always on
// GPUs, on the CPU when switched on.
bool runs_kernels(const at::Tensor& t);

// The native handle of the stream torch is using on `t`'s device
// (cudaStream_t or hipStream_t); null in a build without GPU kernels.
hip::NativeStream current_stream(const at::Tensor& t);

// Whether `t`'s device is capturing work into a GPU graph on the current
// stream; in a build without GPU kernels (no stream query) every GPU tensor
// counts as captured.
bool stream_capturing(const at::Tensor& t);

// Throws, naming the kernel, when a launch reported an error.
void check_launch(hip::LaunchError error, const char* kernel);

// Runs a csrc/hip kernel for tensors on `t`'s device: launch(target, stream)
// with target std::integral_constant<hip::Target, ...>, on the current stream
// of a GPU, or on the host grid for CPU tensors (portability.h, "host target").
// On a GPU `t`'s device is made the current one for the launch: a kernel runs
// on the current device, and a tensor on cuda:1 while cuda:0 is current would
// otherwise be read from the wrong device (PyTorch sets no device for a
// custom op's kernel).
// A build without GPU kernels reports so when a GPU tensor needs one
// (BWDCONV_TARGET_FUNCTION, csrc/hip/portability.h).
template <typename Launch>
void run_kernel(const char* kernel, const at::Tensor& t, Launch&& launch) {
  using Host = std::integral_constant<hip::Target, hip::Target::host>;
  using Device = std::integral_constant<hip::Target, hip::Target::device>;
  if (t.is_cpu()) {
    check_launch(launch(Host{}, nullptr), kernel);
  } else {
    const c10::DeviceGuard on_device(t.device());
    check_launch(launch(Device{}, current_stream(t)), kernel);
  }
}

// interleave: writes dx from the phases' sub-convolution results, in one pass
// per up to 32 phases of the kernel (csrc/hip/interleave.cu) on GPUs and on
// the host grid when switched on (kernels.h), with strided ATen copies per
// phase on the CPU otherwise:
// phase r's result row q lands at dx[s*q + r - p]; rows past the result, and
// phases without one, are zeros. phase, phase_stacked and swap1x1 share it.

// What one phase (residues row-major, last dim fastest) contributes to dx.
struct PhaseInput {
  hip::PhaseWrite write = hip::PhaseWrite::Zero;
  at::Tensor result;            // [N, C', q...] when write == Copy
  int64_t channel_offset = 0;   // the phase's first channel in `result`
};

// Channel c of dx reads channel (c / per_group) * group_step + c % per_group
// (+ the phase's channel offset) of its result; per_group = C reads channel c.
struct ChannelMap {
  int64_t per_group = 1;
  int64_t group_step = 0;
};

// An uninitialised dx of the plan's input sizes in `format`, like grad_output
// otherwise: what interleave then writes in full.
at::Tensor empty_input_gradient(const Plan& plan, const at::Tensor& grad_output,
                                at::MemoryFormat format);

// Writes every slot of every phase into dx: `phases` has one entry per phase
// of plan.phases, whose slots (PhaseDim) say where each result row lands.
void interleave(at::Tensor& dx, const Plan& plan, const std::vector<PhaseInput>& phases,
                ChannelMap channels);

}  // namespace bwdconv::ops
