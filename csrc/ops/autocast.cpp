// Autocast for bwdconv::convolution and bwdconv::conv_transpose, as for aten's convolutions (a
// lower-precision op): floating operands are cast to the autocast dtype of
// the device (float16 on CUDA by default, bfloat16 on the CPU), then the op
// runs with autocast excluded. The backward ops run outside autocast, in the
// dtype of the forward.
#include "ops/precompiled.h"  // first, as the precompiled header must be

#include <ATen/autocast_mode.h>
#include <torch/library.h>

#include "ops/convolution.h"

namespace bwdconv::ops {
namespace {

template <c10::DeviceType kDevice>
at::Tensor convolution_autocast(const at::Tensor& input, const at::Tensor& weight,
                                const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                                at::IntArrayRef padding, at::IntArrayRef dilation,
                                int64_t groups) {
  c10::impl::ExcludeDispatchKeyGuard no_autocast(
      at::autocast::get_autocast_dispatch_key_from_device_type(kDevice));
  const at::ScalarType dtype = at::autocast::get_lower_precision_fp_from_device_type(kDevice);
  return call_convolution(at::autocast::cached_cast(dtype, input, kDevice),
                          at::autocast::cached_cast(dtype, weight, kDevice),
                          at::autocast::cached_cast(dtype, bias, kDevice), stride, padding,
                          dilation, groups);
}

template <c10::DeviceType kDevice>
at::Tensor conv_transpose_autocast(const at::Tensor& input, const at::Tensor& weight,
                                   const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                                   at::IntArrayRef padding, at::IntArrayRef output_padding,
                                   int64_t groups, at::IntArrayRef dilation) {
  c10::impl::ExcludeDispatchKeyGuard no_autocast(
      at::autocast::get_autocast_dispatch_key_from_device_type(kDevice));
  const at::ScalarType dtype = at::autocast::get_lower_precision_fp_from_device_type(kDevice);
  return call_conv_transpose(at::autocast::cached_cast(dtype, input, kDevice),
                             at::autocast::cached_cast(dtype, weight, kDevice),
                             at::autocast::cached_cast(dtype, bias, kDevice), stride, padding,
                             output_padding, groups, dilation);
}

}  // namespace

TORCH_LIBRARY_IMPL(bwdconv, AutocastCPU, m) {
  m.impl("convolution", TORCH_FN(convolution_autocast<c10::DeviceType::CPU>));
  m.impl("conv_transpose", TORCH_FN(conv_transpose_autocast<c10::DeviceType::CPU>));
}

TORCH_LIBRARY_IMPL(bwdconv, AutocastCUDA, m) {
  m.impl("convolution", TORCH_FN(convolution_autocast<c10::DeviceType::CUDA>));
  m.impl("conv_transpose", TORCH_FN(conv_transpose_autocast<c10::DeviceType::CUDA>));
}

}  // namespace bwdconv::ops
