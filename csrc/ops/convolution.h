// The bwdconv operator library (convolution.cpp), called through the
// dispatcher, so that autograd, autocast and torch.compile's tracing see the calls.
#pragma once

#include <ATen/ATen.h>

#include <optional>
#include <tuple>

namespace bwdconv::ops {

at::Tensor call_convolution(const at::Tensor& input, const at::Tensor& weight,
                            const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                            at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups);

at::Tensor call_conv_transpose(const at::Tensor& input, const at::Tensor& weight,
                               const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                               at::IntArrayRef padding, at::IntArrayRef output_padding,
                               int64_t groups, at::IntArrayRef dilation);

at::Tensor call_backward_input(const at::Tensor& grad_output, const at::Tensor& weight,
                               c10::SymIntArrayRef input_size, at::IntArrayRef stride,
                               at::IntArrayRef padding, at::IntArrayRef dilation,
                               int64_t groups);

at::Tensor call_backward_weight(const at::Tensor& grad_output, const at::Tensor& input,
                                c10::SymIntArrayRef weight_size, at::IntArrayRef stride,
                                at::IntArrayRef padding, at::IntArrayRef dilation,
                                int64_t groups);

std::tuple<at::Tensor, at::Tensor> call_backward_both(const at::Tensor& grad_output,
                                                      const at::Tensor& input,
                                                      const at::Tensor& weight,
                                                      at::IntArrayRef stride,
                                                      at::IntArrayRef padding,
                                                      at::IntArrayRef dilation, int64_t groups);

}  // namespace bwdconv::ops
