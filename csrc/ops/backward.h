// Runs the planned strategy for each gradient and returns it in the layout
// PyTorch's meta function for convolution_backward promises.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <utility>
#include <vector>

#include "dispatch/plan.h"
#include "ops/geometry.h"

namespace bwdconv::ops {

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

struct BackwardCall;

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

// What every plan made from now on is forced to use: a strategy (nothing:
// plan freely) and how swap1x1 writes dx when it serves (nothing: the
// planner's choice); `strict`: raise where the forcing cannot serve instead
// of planning those gradients freely (see make_plan). Set and read as one, so
// a plan never sees half of a change.
struct Forcing {
  std::optional<Strategy> strategy;
  std::optional<Swap1x1Writer> swap1x1_writer;
  bool strict = false;
};
void set_forcing(const Forcing& forcing);
Forcing current_forcing();

// Every field a plan depends on, as a key (the plan cache's, and the start of
// the measured decisions' key), with room for `extra_capacity` more.
std::vector<int64_t> plan_key(const ConvGeometry& geometry, const Forcing& forcing,
                              size_t extra_capacity = 0);

// A hash of such a key, for the tables that a new shape adds to.
struct PlanKeyHash {
  size_t operator()(const std::vector<int64_t>& key) const;
};

// The one way to a plan: the forced strategy's under `forcing` (the current
// forcing by default), else the measured decision for `call`, else the
// rules', each cached per shape (docs/DESIGN.md, "Decisions"). `pending`:
// the autotuner waits to measure the call's key on real operands, and the
// plan is the rules', for this call only. Throws ValueError where strict
// forcing cannot serve.
struct PlanLookup {
  std::shared_ptr<const Plan> plan;
  bool pending = false;
};
PlanLookup resolve_plan(const ConvGeometry& geometry, const BackwardCall* call,
                        const Forcing& forcing = current_forcing());

// The plan of a backward described by `call` when it computes each gradient
// the call wants with aten under the current forcing, with no tuning
// pending: then PyTorch's own autograd node can serve the call
// (docs/DESIGN.md, "Pass-through"); nullptr otherwise. Throws ValueError
// where strict forcing cannot serve.
std::shared_ptr<const Plan> aten_only_plan(const ConvGeometry& geometry,
                                           const BackwardCall& call);

}  // namespace bwdconv::ops
