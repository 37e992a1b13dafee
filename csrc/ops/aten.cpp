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
  // channels_last. The input is only a stand-in of the right sizes here, so the
  // weight carries the gradient's layout: aten then computes in the layout it
  // picks for the real input (a 1x1 filter is restrided for free).
  const at::Tensor laid_out = in_layout(weight, gradient_memory_format(grad_output, weight));
  return aten_gradient(grad_output, stand_in(grad_output, input_sizes), laid_out, params,
                       /*want_input=*/true);
}

at::Tensor aten_grad_weight(const at::Tensor& grad_output, const at::Tensor& input,
                            at::IntArrayRef weight_sizes, const ConvParams& params) {
  return aten_gradient(grad_output, input, stand_in(grad_output, weight_sizes), params,
                       /*want_input=*/false);
}

}  // namespace bwdconv::ops
