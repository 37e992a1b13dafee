// aten: the gradients computed by at::native::convolution_backward (cuDNN,
// MIOpen, oneDNN or ATen's own kernels). Called directly, not through the
// dispatcher, so that it stays the fallback when bwdconv overrides
// aten::convolution_backward itself.
#pragma once

#include <ATen/ATen.h>

#include "ops/geometry.h"

namespace bwdconv::ops {

at::Tensor aten_grad_input(const at::Tensor& grad_output, const at::Tensor& weight,
                           at::IntArrayRef input_sizes, const ConvParams& params);

at::Tensor aten_grad_weight(const at::Tensor& grad_output, const at::Tensor& input,
                            at::IntArrayRef weight_sizes, const ConvParams& params);

}  // namespace bwdconv::ops
