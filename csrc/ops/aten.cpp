#include "ops/precompiled.h"  // first, as the precompiled header must be

#include "ops/aten.h"

#include <ATen/EmptyTensor.h>
#include <ATen/ops/convolution_backward_native.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <mutex>
#include <tuple>
#include <vector>

#if defined(__unix__) || defined(__APPLE__)
#include <sys/mman.h>
#define BWDCONV_STAND_IN_MAPPING 1
#endif

namespace bwdconv::ops {
namespace {

// At least `bytes` of address space that nothing writes: one read-only
// anonymous mapping, grown by doubling to the largest stand-in asked for and
// never unmapped (a stand-in may still point into the previous one). No page
// of it is backed by memory until it is read (then the kernel's shared zero
// page), and a write faults. Null where it cannot be mapped.
const void* unwritten_bytes(size_t bytes) {
#ifdef BWDCONV_STAND_IN_MAPPING
  static std::atomic<size_t> mapped{0};
  static std::atomic<void*> mapping{nullptr};
  if (bytes <= mapped.load(std::memory_order_acquire)) {
    return mapping.load(std::memory_order_acquire);
  }
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  if (bytes > mapped.load()) {
    const size_t size = std::max(bytes, 2 * mapped.load());
    int flags = MAP_PRIVATE | MAP_ANONYMOUS;
#ifdef MAP_NORESERVE
    flags |= MAP_NORESERVE;
#endif
    void* data = mmap(nullptr, size, PROT_READ, flags, -1, 0);
    if (data == MAP_FAILED) return nullptr;
    mapping.store(data, std::memory_order_release);
    mapped.store(size, std::memory_order_release);
  }
  return mapping.load(std::memory_order_acquire);
#else
  (void)bytes;
  return nullptr;
#endif
}

// The operand of these sizes in `format` that aten's call needs and whose
// values it does not read: the input of an input gradient, the weight of a
// weight gradient (docs/DESIGN.md, "aten"). Dense and in the gradient's
// layout, as the real operand would be, so that the backend takes the real
// one's path (an expanded one-element tensor made oneDNN materialise an
// input-sized copy first: benchmarks/results/cpu-2026-11-23-float16-channels-last).
// On the CPU it lies in unwritten_bytes and takes no memory; elsewhere it is
// an uninitialised tensor.
at::Tensor stand_in(const at::Tensor& like, at::IntArrayRef sizes, at::MemoryFormat format) {
  if (like.is_cpu()) {
    const std::vector<int64_t> strides = fresh_strides(sizes, format);
    const size_t bytes = at::detail::computeStorageNbytes(sizes, strides, like.dtype().itemsize());
    const void* data = bytes > 0 ? unwritten_bytes(bytes) : nullptr;
    if (data != nullptr) {
      return at::from_blob(const_cast<void*>(data), sizes, strides, like.options());
    }
  }
  return at::empty(sizes, like.options().memory_format(format));
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_backward(const at::Tensor& grad_output,
                                                               const at::Tensor& input,
                                                               const at::Tensor& weight,
                                                               const ConvParams& p,
                                                               std::array<bool, 3> mask) {
  const std::vector<int64_t> no_output_padding(p.stride.size(), 0);
  return at::native::convolution_backward(grad_output, input, weight, std::nullopt, p.stride,
                                          p.padding, p.dilation, /*transposed=*/false,
                                          no_output_padding, p.groups, mask);
}

}  // namespace

at::Tensor aten_gradient(const at::Tensor& grad_output, const at::Tensor& input,
                         const at::Tensor& weight, const ConvParams& p, bool want_input) {
  auto grads = native_backward(grad_output, input, weight, p, {want_input, !want_input, false});
  return want_input ? std::get<0>(grads) : std::get<1>(grads);
}

std::pair<at::Tensor, at::Tensor> aten_grads(const at::Tensor& grad_output,
                                             const at::Tensor& input, const at::Tensor& weight,
                                             const ConvParams& params) {
  auto grads = native_backward(grad_output, input, weight, params, {true, true, false});
  return {std::get<0>(grads), std::get<1>(grads)};
}

// The backends compute in channels_last when the input or the weight is
// channels_last: the stand-in operand carries the gradient's layout.
at::Tensor aten_grad_input(const Plan& plan, const at::Tensor& grad_output,
                           const at::Tensor& weight, at::MemoryFormat format) {
  const at::Tensor input = stand_in(grad_output, input_sizes(plan.geometry), format);
  return aten_gradient(grad_output, input, weight, geometry_params(plan.geometry),
                       /*want_input=*/true);
}

at::Tensor aten_weight_gradient(const at::Tensor& grad_output, const at::Tensor& input,
                                at::IntArrayRef weight_sizes, const ConvParams& params) {
  const at::Tensor weight =
      stand_in(grad_output, weight_sizes, gradient_memory_format(input, grad_output));
  return aten_gradient(grad_output, input, weight, params, /*want_input=*/false);
}

namespace {

// PyTorch 2.11's CPU bfloat16 conv3d (oneDNN) reads memory it never wrote
// on some shapes with a spatial dim of size 1, in NCDHW and channels_last_3d
// alike: values far off or NaN, changing from call to call; and it crashes
// (segfault) on others with dilation. Float32 and float16 are right on the
// same shapes, as are bfloat16's 1D and 2D (docs/limitations.md).
bool cpu_bfloat16_3d(const at::Tensor& input) {
  return input.is_cpu() && input.dim() == 5 && input.scalar_type() == at::kBFloat16;
}

}  // namespace

at::Tensor stride1_convolution(const at::Tensor& input, const at::Tensor& weight,
                               at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups) {
  const std::vector<int64_t> ones(padding.size(), 1), zeros(padding.size(), 0);
  // aten::convolution reads the user's flags as aten's own call does:
  // cudnn.benchmark, determinism, cudnn.enabled and the TF32 setting for
  // convolutions (docs/DESIGN.md, "Accuracy and what the tests prove").
  const auto convolve = [&](const at::Tensor& in, const at::Tensor& filter) {
    return at::convolution(in, filter, std::nullopt, ones, padding, dilation,
                           /*transposed=*/false, zeros, groups);
  };
  if (cpu_bfloat16_3d(input)) {  // in float32, rounded once, laid out as aten's would be
    constexpr auto last = at::MemoryFormat::ChannelsLast3d;
    const bool channels_last =
        input.suggest_memory_format() == last || weight.suggest_memory_format() == last;
    return convolve(input.to(at::kFloat).contiguous(), weight.to(at::kFloat).contiguous())
        .to(at::kBFloat16, /*non_blocking=*/false, /*copy=*/false,
            channels_last ? last : at::MemoryFormat::Contiguous);
  }
  return convolve(input, weight);
}

at::Tensor aten_grad_weight(const Plan& plan, const at::Tensor& grad_output,
                            const at::Tensor& input, at::MemoryFormat /*format*/) {
  return aten_weight_gradient(grad_output, input, weight_sizes(plan.geometry),
                              geometry_params(plan.geometry));
}

}  // namespace bwdconv::ops
