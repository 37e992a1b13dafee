// The gradients computed as a plan says: the implementations of the
// registry's strategies (dispatch/strategies.h), one function per gradient a
// strategy computes, all with one signature; aten when a strategy runs out of
// memory; served() counting each one. And aten::convolution_backward planned
// by bwdconv: the backward of every convolution bwdconv records (convolution.cpp)
// and, with the "aten" scope on, of every convolution in the process
// (aten_scope.cpp).
#pragma once

#include <ATen/ATen.h>

#include <array>
#include <optional>
#include <tuple>
#include <utility>

#include "dispatch/plan.h"
#include "ops/geometry.h"
#include "ops/plans.h"

namespace bwdconv::ops {

// A gradient computed by a strategy: `operand` is the weight for the input
// gradient and the input for the weight gradient; `format` is the layout
// PyTorch's meta function gives that gradient. Every size and convolution
// argument comes from plan.geometry, every strategy geometry from the plan.
using GradientFn = at::Tensor (*)(const Plan& plan, const at::Tensor& grad_output,
                                  const at::Tensor& operand, at::MemoryFormat format);

// The function computing `gradient` with `strategy`; the registry says it computes it.
GradientFn implementation(Strategy strategy, Gradient gradient);

// Makes `fn` the function computing `gradient` with `strategy` (nullptr stays
// nullptr: the registry says what a strategy computes) and returns the one it
// replaces: how the tests' fault injection (csrc/ops/testing.cpp) stands in
// for a strategy, at no cost to a call.
GradientFn replace_implementation(Strategy strategy, Gradient gradient, GradientFn fn);


// The plan's geometry describes the operands' sizes and convolution arguments.
at::Tensor compute_grad_input(const Plan& plan, const at::Tensor& grad_output,
                              const at::Tensor& weight);

at::Tensor compute_grad_weight(const Plan& plan, const at::Tensor& grad_output,
                               const at::Tensor& input);

// Both gradients; when both are planned for aten, in one aten call.
std::pair<at::Tensor, at::Tensor> compute_grads(const Plan& plan, const at::Tensor& grad_output,
                                                const at::Tensor& input, const at::Tensor& weight);

// The forward of a transposed convolution planned as its matching
// convolution's input gradient (`plan`, its geometry marked transposed):
// the planned strategy's input gradient of grad_output = input, plus the
// bias per channel; planned for aten, aten's own transposed convolution
// (docs/DESIGN.md, "Transposed convolutions").
at::Tensor compute_transposed_forward(const Plan& plan, const at::Tensor& input,
                                      const at::Tensor& weight,
                                      const std::optional<at::Tensor>& bias,
                                      at::IntArrayRef output_padding);

// The bias gradient as aten computes it: grad_output summed over every dim
// but the channel dim.
at::Tensor compute_grad_bias(const at::Tensor& grad_output);

// What served() counts: an input or a weight gradient, or a transposed
// convolution's forward (the matching convolution's input gradient).
enum class Served { input, weight, forward };
const char* served_name(Served served);

// How many of each computation each strategy has made since the last reset:
// a cheap, always-on record of what actually ran; `measured_only`: only
// those a measured decision chose.
int64_t served_count(Served served, Strategy strategy, bool measured_only = false);
void reset_served_counts();

// Counts one computation made as `plan` says (for callers that compute it
// without compute_grad_*).
void count_served(Served served, const GradientPlan& plan);
void count_served(Served served, Strategy strategy, bool measured);


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
