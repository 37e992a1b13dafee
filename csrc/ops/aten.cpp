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

at::Tensor aten_grad_input(const at::Tensor& grad_output, const at::Tensor& weight,
                           at::IntArrayRef input_sizes, const ConvParams& params) {
  // The backends compute in channels_last when the input or the weight is
  // channels_last: the stand-in input carries the gradient's layout.
  const at::Tensor input =
      stand_in(grad_output, input_sizes, gradient_memory_format(grad_output, weight));
  return aten_gradient(grad_output, input, weight, params, /*want_input=*/true);
}

at::Tensor aten_grad_weight(const at::Tensor& grad_output, const at::Tensor& input,
                            at::IntArrayRef weight_sizes, const ConvParams& params) {
  const at::Tensor weight =
      stand_in(grad_output, weight_sizes, gradient_memory_format(input, grad_output));
  return aten_gradient(grad_output, input, weight, params, /*want_input=*/false);
}

}  // namespace bwdconv::ops
