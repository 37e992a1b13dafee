// Tensors and convolution arguments -> the planner's ConvGeometry, with the
// checks that turn bad input into an exception naming the problem.
#pragma once

#include <ATen/ATen.h>

#include <vector>

#include "dispatch/geometry.h"

namespace bwdconv::ops {

struct ConvParams {
  at::IntArrayRef stride;
  at::IntArrayRef padding;
  at::IntArrayRef dilation;
  int64_t groups;
};

// The sizes part of a geometry (no checks; output sizes left unset). The
// input and weight sizes are (N, C, spatial...) of equal rank 3-5, with one
// stride, padding and dilation per spatial dim.
ConvGeometry sizes_geometry(at::IntArrayRef input_sizes, at::IntArrayRef weight_sizes,
                            const ConvParams& params);

// The convolution arguments of a geometry, as views into it: valid while
// `geometry` lives (a plan's geometry lives as long as the plan).
ConvParams geometry_params(const ConvGeometry& geometry);

// (N, C, spatial...) of the input and (O, C/g, filter...) of the weight.
std::vector<int64_t> input_sizes(const ConvGeometry& geometry);
std::vector<int64_t> weight_sizes(const ConvGeometry& geometry);

// Checks the forward operands (input, weight, optional bias) and returns the
// validated geometry of conv(input, weight).
ConvGeometry forward_geometry(const char* op, const at::Tensor& input, const at::Tensor& weight,
                              const std::optional<at::Tensor>& bias, const ConvParams& params);

// The geometry of the backward that conv{spatial_dims}d(input, weight, bias)
// will need, its grad_output in the layout of the call's output (PyTorch's
// gradient layout rule for input and weight); nothing when the call is not a
// valid convolution of plannable operands (the caller lets aten raise). An
// unbatched input (spatial_dims + 1 dims) is a batch of one. No exceptions:
// this runs on every functional call.
std::optional<ConvGeometry> forward_call_geometry(const at::Tensor& input,
                                                  const at::Tensor& weight,
                                                  const std::optional<at::Tensor>& bias,
                                                  const ConvParams& params, int spatial_dims);

// Checks the operands of conv_transpose(input, weight, bias) and returns the
// validated geometry of the matching convolution (its grad_output is
// `input`; its input has the transposed convolution's output size, per
// spatial dim (I - 1)s - 2p + d(K - 1) + output_padding + 1). An output
// padding must be smaller than the stride: then the matching convolution maps
// the output back to exactly the input's size. Its `transposed` flag is left
// unset: the forward's caller sets it.
ConvGeometry transposed_geometry(const char* op, const at::Tensor& input,
                                 const at::Tensor& weight,
                                 const std::optional<at::Tensor>& bias,
                                 const ConvParams& params, at::IntArrayRef output_padding);

// transposed_geometry's answer when the call is valid and bwdconv plans it,
// and, if given, the matching convolution's input has `output_sizes` (a
// gradient of the transposed convolution's output); nothing otherwise (the
// caller lets aten raise). See docs/DESIGN.md, "Transposed convolutions".
std::optional<ConvGeometry> plannable_transposed_geometry(
    const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
    const ConvParams& params, at::IntArrayRef output_padding,
    at::OptionalIntArrayRef output_sizes = std::nullopt);

// Checks grad_output against the sizes of the forward operands and the other
// operand tensor (weight for the input gradient, input for the weight
// gradient); returns the validated geometry of that forward convolution.
ConvGeometry backward_geometry(const char* op, const at::Tensor& grad_output,
                               at::IntArrayRef input_sizes, at::IntArrayRef weight_sizes,
                               const char* operand_name, const at::Tensor& operand,
                               const ConvParams& params);

// PyTorch's rule for the layout of conv gradients (torch/_meta_registrations.py,
// meta_convolution_backward): channels_last when either operand suggests it.
at::MemoryFormat gradient_memory_format(const at::Tensor& a, const at::Tensor& b);

// The layout of the gradients bwdconv's own backward ops return (their fakes
// give the same, python/bwdconv/_library.py): gradient_memory_format, but an
// operand dense in the default layout counts as contiguous whatever it
// suggests. Such an operand has a size-1 dim whose stride is free, and
// torch.compile may run the op on a tensor with another stride there than
// the one it traced (grad_output [3, 1, 3, 8] traced with strides
// (24, 1, 8, 1), run with (24, 24, 8, 1)).
at::MemoryFormat op_gradient_memory_format(const at::Tensor& a, const at::Tensor& b);

// The strides at::empty gives a tensor of these sizes in `format`.
std::vector<int64_t> fresh_strides(at::IntArrayRef sizes, at::MemoryFormat format);

// `t` with exactly the strides a fresh tensor in `format` has: `t` itself, a
// restrided view when only the strides of size-1 dims differ (several stride
// sets are "channels_last" then), or a copy.
at::Tensor in_layout(const at::Tensor& t, at::MemoryFormat format);

// `t` as a view with the strides a fresh tensor has in its layout
// (contiguous where `t` is dense in it, else channels_last where it is dense
// in that), size-1 dims included; `t` itself where it is dense in neither.
// bwdconv.convolution's kernel and fake read their operands so: aten's
// backend reads the strides of size-1 dims when it lays out its output, and
// torch.compile may trace such a stride other than the one a tensor has at
// run time (a gradient [3, 1, 3, 10] traced with strides (30, 1, 10, 1)
// suggests channels_last, and run with (30, 30, 10, 1) does not; docs/DESIGN.md,
// "Pass-through").
at::Tensor settled(const at::Tensor& t);

// Whether settled(t) has other strides than `t`.
bool settling_restrides(const at::Tensor& t);

}  // namespace bwdconv::ops
