// aten: the gradients computed by at::native::convolution_backward (cuDNN,
// MIOpen, oneDNN or ATen's own kernels). Called directly, not through the
// dispatcher, so that it stays the fallback when bwdconv overrides
// aten::convolution_backward itself.
#pragma once

#include <ATen/ATen.h>

#include <utility>

#include "dispatch/plan.h"
#include "ops/geometry.h"

namespace bwdconv::ops {

// The aten strategy (ops/backward.h): each gradient alone.
at::Tensor aten_grad_input(const Plan& plan, const at::Tensor& grad_output,
                           const at::Tensor& weight, at::MemoryFormat format);
at::Tensor aten_grad_weight(const Plan& plan, const at::Tensor& grad_output,
                            const at::Tensor& input, at::MemoryFormat format);

// One gradient from a call's real operands (the input gradient when
// `want_input`, else the weight gradient).
at::Tensor aten_gradient(const at::Tensor& grad_output, const at::Tensor& input,
                         const at::Tensor& weight, const ConvParams& params, bool want_input);

// The weight gradient of any convolution arguments (splitk's partials).
at::Tensor aten_weight_gradient(const at::Tensor& grad_output, const at::Tensor& input,
                                at::IntArrayRef weight_sizes, const ConvParams& params);

// Both gradients in one call: the backends share work between them (oneDNN
// on the CPU computes both for little more than the weight gradient alone).
std::pair<at::Tensor, at::Tensor> aten_grads(const at::Tensor& grad_output,
                                             const at::Tensor& input, const at::Tensor& weight,
                                             const ConvParams& params);

// The stride-1 convolution a strategy computes a gradient with (no bias, no
// output padding) on aten's backends as the user set them up, TF32 included
// (torch.backends.cudnn.allow_tf32, as aten's own convolutions follow it;
// docs/DESIGN.md, "Accuracy and what the tests prove").
at::Tensor stride1_convolution(const at::Tensor& input, const at::Tensor& weight,
                               at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups);

}  // namespace bwdconv::ops
