// The bwdconv operator library: schemas, the CPU / CUDA kernels (ROCm
// tensors use the CUDA key), and the calls into them through the dispatcher.
#include "ops/precompiled.h"  // first, as the precompiled header must be

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <tuple>
#include <vector>

#include "ops/convolution.h"

#include "ops/backward.h"
#include "ops/plans.h"
#include "ops/geometry.h"

namespace bwdconv::ops {
namespace {

ConvParams params_of(at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation,
                     int64_t groups) {
  return {stride, padding, dilation, groups};
}

at::Tensor convolution(const at::Tensor& input, const at::Tensor& weight,
                       const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                       at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups) {
  forward_geometry("bwdconv.convolution", input, weight, bias,
                   params_of(stride, padding, dilation, groups));
  const std::vector<int64_t> no_output_padding(stride.size(), 0);
  return at::convolution(input, weight, bias, stride, padding, dilation, /*transposed=*/false,
                         no_output_padding, groups);
}

at::Tensor convolution_backward_input(const at::Tensor& grad_output, const at::Tensor& weight,
                                      at::IntArrayRef input_size, at::IntArrayRef stride,
                                      at::IntArrayRef padding, at::IntArrayRef dilation,
                                      int64_t groups) {
  const ConvParams params = params_of(stride, padding, dilation, groups);
  const ConvGeometry geometry =
      backward_geometry("bwdconv.convolution_backward_input", grad_output, input_size,
                        weight.sizes(), "weight", weight, params);
  const BackwardCall call = backward_call(grad_output, nullptr, &weight, true, false, params);
  return compute_grad_input(*resolve_plan(geometry, &call).plan, grad_output, weight);
}

at::Tensor convolution_backward_weight(const at::Tensor& grad_output, const at::Tensor& input,
                                       at::IntArrayRef weight_size, at::IntArrayRef stride,
                                       at::IntArrayRef padding, at::IntArrayRef dilation,
                                       int64_t groups) {
  const ConvParams params = params_of(stride, padding, dilation, groups);
  const ConvGeometry geometry =
      backward_geometry("bwdconv.convolution_backward_weight", grad_output, input.sizes(),
                        weight_size, "input", input, params);
  const BackwardCall call = backward_call(grad_output, &input, nullptr, false, true, params);
  return compute_grad_weight(*resolve_plan(geometry, &call).plan, grad_output, input);
}

// The forward of a transposed convolution is the input gradient of the
// matching convolution, whose input has this call's output size and whose
// grad_output is this call's input (docs/DESIGN.md, "Transposed convolutions").
at::Tensor conv_transpose(const at::Tensor& input, const at::Tensor& weight,
                          const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                          at::IntArrayRef padding, at::IntArrayRef output_padding,
                          int64_t groups, at::IntArrayRef dilation) {
  const ConvParams params = params_of(stride, padding, dilation, groups);
  ConvGeometry geometry =
      transposed_geometry("bwdconv.conv_transpose", input, weight, bias, params, output_padding);
  geometry.transposed = true;
  const BackwardCall call = transposed_forward_call(input, weight, params);
  return compute_transposed_forward(*resolve_plan(geometry, &call).plan, input, weight, bias,
                                    output_padding);
}

std::tuple<at::Tensor, at::Tensor> convolution_backward(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight,
    at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups) {
  const ConvParams params = params_of(stride, padding, dilation, groups);
  const ConvGeometry geometry =
      backward_geometry("bwdconv.convolution_backward", grad_output, input.sizes(),
                        weight.sizes(), "weight", weight, params);
  TORCH_CHECK(input.scalar_type() == weight.scalar_type() && input.device() == weight.device(),
              "bwdconv.convolution_backward: expected input and weight of the same dtype and "
              "device, but got ", input.dtype(), " on ", input.device(), " and ", weight.dtype(),
              " on ", weight.device());
  const BackwardCall call = backward_call(grad_output, &input, &weight, true, true, params);
  return compute_grads(*resolve_plan(geometry, &call).plan, grad_output, input, weight);
}

}  // namespace

TORCH_LIBRARY(bwdconv, m) {
  m.def(
      "convolution(Tensor input, Tensor weight, Tensor? bias, int[] stride, int[] padding, "
      "int[] dilation, int groups) -> Tensor");
  m.def(
      "convolution_backward_input(Tensor grad_output, Tensor weight, SymInt[] input_size, "
      "int[] stride, int[] padding, int[] dilation, int groups) -> Tensor");
  m.def(
      "convolution_backward_weight(Tensor grad_output, Tensor input, SymInt[] weight_size, "
      "int[] stride, int[] padding, int[] dilation, int groups) -> Tensor");
  m.def(
      "conv_transpose(Tensor input, Tensor weight, Tensor? bias, int[] stride, int[] padding, "
      "int[] output_padding, int groups, int[] dilation) -> Tensor");
  m.def(
      "convolution_backward(Tensor grad_output, Tensor input, Tensor weight, int[] stride, "
      "int[] padding, int[] dilation, int groups) -> (Tensor grad_input, Tensor grad_weight)");
}

namespace {

// The same kernels serve CPU and GPU tensors: the strategies choose per device.
void register_kernels(torch::Library& m) {
  m.impl("convolution", TORCH_FN(convolution));
  m.impl("conv_transpose", TORCH_FN(conv_transpose));
  m.impl("convolution_backward_input", TORCH_FN(convolution_backward_input));
  m.impl("convolution_backward_weight", TORCH_FN(convolution_backward_weight));
  m.impl("convolution_backward", TORCH_FN(convolution_backward));
}

}  // namespace

TORCH_LIBRARY_IMPL(bwdconv, CPU, m) { register_kernels(m); }

TORCH_LIBRARY_IMPL(bwdconv, CUDA, m) { register_kernels(m); }

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
