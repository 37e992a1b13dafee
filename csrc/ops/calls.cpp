#include "ops/precompiled.h"  // first, as the precompiled header must be

#include "ops/calls.h"

#include <ATen/core/dispatch/Dispatcher.h>

namespace bwdconv::ops {
namespace {

template <typename Signature>
c10::TypedOperatorHandle<Signature> bwdconv_op(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "").typed<Signature>();
}

}  // namespace

at::Tensor call_convolution(const at::Tensor& input, const at::Tensor& weight,
                            const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                            at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups) {
  static auto op = bwdconv_op<at::Tensor(const at::Tensor&, const at::Tensor&,
                                         const std::optional<at::Tensor>&, at::IntArrayRef,
                                         at::IntArrayRef, at::IntArrayRef, int64_t)>(
      "bwdconv::convolution");
  return op.call(input, weight, bias, stride, padding, dilation, groups);
}

at::Tensor call_conv_transpose(const at::Tensor& input, const at::Tensor& weight,
                               const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                               at::IntArrayRef padding, at::IntArrayRef output_padding,
                               int64_t groups, at::IntArrayRef dilation) {
  static auto op = bwdconv_op<at::Tensor(const at::Tensor&, const at::Tensor&,
                                         const std::optional<at::Tensor>&, at::IntArrayRef,
                                         at::IntArrayRef, at::IntArrayRef, int64_t,
                                         at::IntArrayRef)>("bwdconv::conv_transpose");
  return op.call(input, weight, bias, stride, padding, output_padding, groups, dilation);
}

using BackwardSignature = at::Tensor(const at::Tensor&, const at::Tensor&, c10::SymIntArrayRef,
                                     at::IntArrayRef, at::IntArrayRef, at::IntArrayRef, int64_t);

at::Tensor call_backward_input(const at::Tensor& grad_output, const at::Tensor& weight,
                               c10::SymIntArrayRef input_size, at::IntArrayRef stride,
                               at::IntArrayRef padding, at::IntArrayRef dilation,
                               int64_t groups) {
  static auto op = bwdconv_op<BackwardSignature>("bwdconv::convolution_backward_input");
  return op.call(grad_output, weight, input_size, stride, padding, dilation, groups);
}

at::Tensor call_backward_weight(const at::Tensor& grad_output, const at::Tensor& input,
                                c10::SymIntArrayRef weight_size, at::IntArrayRef stride,
                                at::IntArrayRef padding, at::IntArrayRef dilation,
                                int64_t groups) {
  static auto op = bwdconv_op<BackwardSignature>("bwdconv::convolution_backward_weight");
  return op.call(grad_output, input, weight_size, stride, padding, dilation, groups);
}

std::tuple<at::Tensor, at::Tensor> call_backward_both(const at::Tensor& grad_output,
                                                      const at::Tensor& input,
                                                      const at::Tensor& weight,
                                                      at::IntArrayRef stride,
                                                      at::IntArrayRef padding,
                                                      at::IntArrayRef dilation, int64_t groups) {
  static auto op =
      bwdconv_op<std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&,
                                                    const at::Tensor&, at::IntArrayRef,
                                                    at::IntArrayRef, at::IntArrayRef, int64_t)>(
          "bwdconv::convolution_backward");
  return op.call(grad_output, input, weight, stride, padding, dilation, groups);
}

}  // namespace bwdconv::ops
