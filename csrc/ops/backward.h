// aten::convolution_backward planned by bwdconv: the backward of every
// convolution bwdconv records (autograd.cpp) and, with the "aten" scope on,
// of every convolution in the process (aten_scope.cpp).
#pragma once

#include <ATen/ATen.h>

#include <array>
#include <optional>
#include <tuple>

#include "ops/geometry.h"

namespace bwdconv::ops {

// The layouts aten's backend gives the input and weight gradients of a
// convolution of these real operands (`output_padding` read when transposed).
struct GradientFormats {
  at::MemoryFormat input, weight;
};
GradientFormats aten_gradient_formats(const at::Tensor& input, const at::Tensor& weight,
                                      at::OptionalIntArrayRef bias_sizes, at::IntArrayRef stride,
                                      at::IntArrayRef padding, at::IntArrayRef dilation,
                                      int64_t groups, bool transposed = false,
                                      at::IntArrayRef output_padding = {});

// aten_gradient_formats of the transposed convolution conv_transpose(input,
// weight) (a bias or not): its output's layout is the input gradient's.
GradientFormats aten_transposed_formats(const at::Tensor& input, const at::Tensor& weight,
                                        bool has_bias, const ConvParams& params,
                                        at::IntArrayRef output_padding);

// A transposed convolution's output, which bwdconv's strategies lay out by
// PyTorch's meta rule (channels_last when either operand is), in the layout
// aten's backend gives it (on the CPU the slow 3-D and float64 paths write
// contiguous outputs from channels_last operands), which aten.convolution's
// fake, and so bwdconv's, gives too: restrided where they differ.
at::Tensor in_atens_transposed_layout(const at::Tensor& output, const at::Tensor& input,
                                      const at::Tensor& weight,
                                      const std::optional<at::Tensor>& bias,
                                      const ConvParams& params, at::IntArrayRef output_padding);

// aten::convolution_backward planned by bwdconv: the scope's kernel. The
// gradients planned for aten and the bias gradient come from aten's own
// kernel with these arguments; the ones bwdconv computes are laid out as
// aten's backend lays out its results. Calls bwdconv does not plan go to aten.
// Real tensors only (it calls ATen's native kernels directly).
std::tuple<at::Tensor, at::Tensor, at::Tensor> planned_convolution_backward(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight,
    at::OptionalIntArrayRef bias_sizes, at::IntArrayRef stride, at::IntArrayRef padding,
    at::IntArrayRef dilation, bool transposed, at::IntArrayRef output_padding, int64_t groups,
    std::array<bool, 3> output_mask);

}  // namespace bwdconv::ops
