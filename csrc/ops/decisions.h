// Measured decisions: per backward call key (geometry, operand layouts,
// device, wanted gradients), the strategy the autotuner measured fastest and
// verified against aten on this device. Consulted by resolve_plan (backward.h) after forcing
// and before the planner's rules. The table is filled by a tuning hook that
// Python registers (python/bwdconv/_tune.py): it answers from the persistent
// cache or tunes on the call's real operands.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dispatch/plan.h"
#include "ops/geometry.h"

namespace bwdconv::ops {

// A backward call whose plan a measurement may decide. The tensors are the
// real operands (nullptr where the call has none, e.g. explain); `input` and
// `weight` are the forward operands whose sizes the geometry holds.
struct BackwardCall {
  bool wants_input = false;
  bool wants_weight = false;
  const at::Tensor* grad_output = nullptr;
  const at::Tensor* input = nullptr;
  const at::Tensor* weight = nullptr;
  // The weight tensor's layout, when the input gradient (which reads it) is wanted.
  std::optional<MemoryLayout> weight_layout;
  int64_t device_index = -1;
  ConvParams params;
  // A transposed convolution's forward that autograd records: its backward
  // follows in the same step, so the tuner times the two together and the
  // decision stands apart from the one for inference (docs/tuning.md, "What
  // is timed").
  bool records_autograd = false;
};

// The call of an op with these operands (nullptr: the op has only sizes).
BackwardCall backward_call(const at::Tensor& grad_output, const at::Tensor* input,
                           const at::Tensor* weight, bool wants_input, bool wants_weight,
                           const ConvParams& params);

// The call a transposed convolution's forward (the matching convolution's
// input gradient) plans: grad_output is its input.
BackwardCall transposed_forward_call(const at::Tensor& input, const at::Tensor& weight,
                                     const ConvParams& params);

// While alive, the calling thread's transposed forwards count as recorded by
// autograd as grad mode and these operands say at its construction: bwdconv's
// op runs its forward inside the node it records, with grad mode off.
class TransposedForwardRecording {
 public:
  TransposedForwardRecording(const at::Tensor& input, const at::Tensor& weight);
  ~TransposedForwardRecording();
  TransposedForwardRecording(const TransposedForwardRecording&) = delete;
  TransposedForwardRecording& operator=(const TransposedForwardRecording&) = delete;

 private:
  std::optional<bool> previous_;
};

// The backward call that autograd will make for a forward convolution of
// these operands: the gradients of the operands that require one.
BackwardCall forward_backward_call(const at::Tensor& input, const at::Tensor& weight,
                                   const ConvParams& params);

// What was measured best for one gradient, and why (shown by explain).
struct GradientDecision {
  Strategy strategy = Strategy::aten;
  std::optional<Swap1x1Writer> writer;  // swap1x1 only: the writer measured
  std::string reason;
};

struct Decision {
  std::optional<GradientDecision> input;   // nothing: the rules decide it
  std::optional<GradientDecision> weight;
};

// The hook's answer for a key: a decision; "the rules decide" (kept, so the
// key is not asked again until forget_decisions); or "ask again next time"
// (tuning was not possible now, e.g. during graph capture).
struct HookAnswer {
  enum Kind { ask_again, rules, decided } kind = ask_again;
  Decision decision;
};

// What the hook would answer without being asked, published by Python
// (python/bwdconv/_tune.py) while it does not tune: a call whose input and
// weight sizes no cached decision has gets the rules (docs/DESIGN.md,
// "Decisions"), so that a process whose shapes keep changing (variable
// sequence lengths, image sizes) does not call into Python for each new one.
// `environment` holds the variables that locate the cache file, as they were
// when it was read (nothing: unset); once one reads otherwise, or
// forget_decisions runs, the hook is asked again.
struct HookShortcut {
  // (name, value or nothing when unset) of each variable.
  using Environment = std::vector<std::pair<std::string, std::optional<std::string>>>;
  std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> cached_sizes;
  Environment environment;
};
void set_hook_shortcut(HookShortcut shortcut);
bool has_hook_shortcut();

// Called once per unseen key with the rules plan (its candidates: every
// strategy that can serve). Runs with the calling thread marked as tuning.
using TuningHook =
    std::function<HookAnswer(const ConvGeometry&, const BackwardCall&, const Plan& rules)>;
void set_tuning_hook(TuningHook hook);

// The plan a measured decision sets for this call, or the rules' plan when
// the hook let the rules decide the key (nullptr when decisions are not
// consulted for this call, or no hook is set), and whether the hook asked to be asked
// again: tuning is pending for the key but was not possible now (no
// operands, graph capture...).
struct DecisionLookup {
  std::shared_ptr<const Plan> plan;
  bool pending = false;
};
DecisionLookup look_up_decision(const ConvGeometry& geometry, const BackwardCall& call);

// Whether resolve_plan consults the decisions at all (default true); false: the
// rules decide, e.g. for the benchmark's column of the planner's rules.
void use_decisions(bool use);

// Whether the calling thread is inside the tuning hook (the tuner's own calls
// are neither tuned again nor counted as served).
bool tuning_on_this_thread();

// Marks the calling thread as the tuner's for good (or not): a thread of the
// tuner's own that measures through the public ops.
void mark_thread_as_tuning(bool tuning);

// Forgets every decision (clear == true) or only the "rules decide" answers,
// so that keys are asked again (autotune was switched on), and the hook's
// shortcut.
void forget_decisions(bool clear);

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

// Test-only: every gradient `strategy` computes from now on is made wrong
// (nothing: no corruption), to prove that the tuner excludes a candidate that
// disagrees with aten.
void set_corrupted_strategy(std::optional<Strategy> strategy);
at::Tensor corrupted_if_asked(Strategy strategy, at::Tensor gradient);

}  // namespace bwdconv::ops
