// The implementations of the registry's strategies (dispatch/strategies.h),
// one function per gradient a strategy computes, all with one signature, and
// the gradients computed as a plan says: aten when a strategy runs out of
// memory, and served() counting each one.
#pragma once

#include <ATen/ATen.h>

#include <optional>
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

// Computes one gradient with an explicit strategy (and swap1x1 writer),
// without touching the process-wide forcing: how the tuner times and checks a
// candidate. `operand` is the weight for the input gradient, the input for
// the weight gradient; `sizes` the sizes of the gradient.
at::Tensor gradient_with(Gradient gradient, Strategy strategy,
                         std::optional<Swap1x1Writer> writer, const at::Tensor& grad_output,
                         const at::Tensor& operand, at::IntArrayRef sizes,
                         const ConvParams& params);

// Both gradients as a decision would compute them (one aten call when both
// are aten): how the tuner compares a pair of per-gradient winners with
// aten's single call for both.
std::pair<at::Tensor, at::Tensor> gradients_with(const Decision& decision,
                                                 const at::Tensor& grad_output,
                                                 const at::Tensor& input, const at::Tensor& weight,
                                                 const ConvParams& params);

}  // namespace bwdconv::ops
