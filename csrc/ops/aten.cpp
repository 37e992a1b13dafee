#include "ops/aten.h"

#include <ATen/ops/convolution_backward_native.h>

#include <array>
#include <tuple>
#include <vector>

namespace bwdconv::ops {
namespace {

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

at::Tensor aten_gradient(const at::Tensor& grad_output, const at::Tensor& input,
                         const at::Tensor& weight, const ConvParams& p, bool want_input) {
  auto grads = native_backward(grad_output, input, weight, p, {want_input, !want_input, false});
  return want_input ? std::get<0>(grads) : std::get<1>(grads);
}

}  // namespace

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

at::Tensor aten_grad_weight(const Plan& plan, const at::Tensor& grad_output,
                            const at::Tensor& input, at::MemoryFormat /*format*/) {
  return aten_weight_gradient(grad_output, input, weight_sizes(plan.geometry),
                              geometry_params(plan.geometry));
}

}  // namespace bwdconv::ops
