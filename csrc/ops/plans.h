// The one way from a call to its plan (docs/DESIGN.md, "Decisions"): the
// forced strategy's, else the measured decision's, else the rules', kept in
// one per-thread cache under one key (CallKey) with one invalidation rule
// (an epoch that everything able to change a plan advances).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/ArrayRef.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dispatch/plan.h"
#include "ops/geometry.h"

namespace bwdconv::ops {

// ---- What plans are forced to use ----------------------------------------

// A strategy (nothing: plan freely) and how swap1x1 writes dx when it serves
// (nothing: the planner's choice); `strict`: raise where the forcing cannot
// serve instead of planning those gradients freely (see make_plan). Set and
// read as one, so that a plan never sees half of a change.
struct Forcing {
  std::optional<Strategy> strategy;
  std::optional<Swap1x1Writer> swap1x1_writer;
  bool strict = false;
};
void set_forcing(const Forcing& forcing);
Forcing current_forcing();

// ---- The call a plan is for ------------------------------------------------

// A backward call whose plan a measurement may decide. The tensors are the
// real operands (nullptr where the call has none, e.g. a forward that plans
// its backward, or explain); `input` and `weight` are the forward operands
// whose sizes the geometry holds.
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

// The backward call that autograd will make for a forward convolution of
// these operands: the gradients of the operands that require one.
BackwardCall forward_backward_call(const at::Tensor& input, const at::Tensor& weight,
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

// ---- The key ---------------------------------------------------------------

// The fields of one call, in order, digested as they are added into two
// 64-bit words by two unrelated mixes. Entries are compared by digest: two
// calls that differ but share all 128 bits would share a plan (were the
// digests random, any two of 2^32 keys would share one with a chance of
// about 2^-65). Kept small, so that a probe touches one cache line: between
// a model's operations the lines a call touches cost more than its
// instructions.
class CallKey {
 public:
  void add(int64_t word) {
    const uint64_t w = static_cast<uint64_t>(word);
    first_ = (first_ ^ w) * 0xff51afd7ed558ccdull;
    first_ ^= first_ >> 32;
    second_ = (second_ + w + 0x632be59bd9b4e019ull) * 0xc4ceb9fe1a85ec53ull;
    second_ ^= second_ >> 29;
  }
  void add(c10::IntArrayRef words) {
    add(static_cast<int64_t>(words.size()));  // lengths keep adjacent lists apart
    for (const int64_t word : words) add(word);
  }
  // A tensor's sizes, dtype, device and suggested memory format.
  void add_operand(const at::Tensor& tensor);
  // A convolution's stride, padding, dilation, output padding and groups.
  void add_arguments(const ConvParams& params, c10::IntArrayRef output_padding);
  // Every field of a geometry.
  void add_geometry(const ConvGeometry& geometry);

  uint64_t first() const { return first_; }
  uint64_t second() const { return second_; }
  bool operator<(const CallKey& other) const {
    return std::pair(first_, second_) < std::pair(other.first_, other.second_);
  }

 private:
  uint64_t first_ = 0x9e3779b97f4a7c15ull;
  uint64_t second_ = 0x2545f4914f6cdd1dull;
};

// Where a key is made: each place digests its own arguments, so it tags them.
enum class KeyTag : int64_t {
  functional_convolution = 1,
  functional_transposed,
  functional_transposed_weight,
  aten_backward,
  aten_transposed_forward,
  resolution,  // resolve_plan's own: the geometry and the call
};

// ---- The cache -------------------------------------------------------------

// What a call planned for aten needs of its plan: each gradient's strategy
// and whether a measurement chose it, inline in the cache entry, so that
// such a call reads one cache line and no plan (docs/DESIGN.md, "Decisions").
struct PlanSummary {
  Strategy input = Strategy::aten, weight = Strategy::aten;
  bool planned = false;  // false: bwdconv does not plan the call (an invalid one)
  bool input_measured = false, weight_measured = false;

  static PlanSummary of(const Plan* plan);
  // Whether aten computes each gradient wanted.
  bool aten_computes_all(bool wants_input, bool wants_weight) const {
    return (!wants_input || input == Strategy::aten) && (!wants_weight || weight == Strategy::aten);
  }
};

// This thread's entry for a key in the epoch current when the lookup is made
// (one table for the thread's own calls, one for the tuner's while it runs
// on the thread: the tuner plans without measured decisions). found(): the
// key has an entry; summary() says what it planned, and plan() (read right
// after the lookup, before another call on the thread can replace the
// entry) is the plan itself. keep() enters what the caller then finds; an
// epoch advanced since the lookup makes it stale at once, so a plan made
// from a superseded state is never used.
class CachedPlan {
 public:
  explicit CachedPlan(const CallKey& key);
  bool found() const { return found_; }
  const PlanSummary& summary() const { return summary_; }
  std::shared_ptr<const Plan> plan() const;
  void keep(std::shared_ptr<const Plan> plan) const;

 private:
  CallKey key_;
  uint64_t epoch_ = 0;
  bool found_ = false;
  size_t slot_ = 0;
  PlanSummary summary_;
};

// Advances the epoch: every thread's entries are stale from now on.
void forget_plans();

// ---- Resolution ------------------------------------------------------------

// The plan for `geometry` called as `call` says (nullptr: no call, e.g. a
// shape explain asks about): the forced strategy's under `forcing`, else the
// measured decision's, else the rules', cached per key. `pending`: the
// autotuner waits to measure the call's key on real operands; the plan is
// the rules', for this call only (not cached). Gradients a strategy ran out
// of memory on for this shape are aten's. Throws ValueError where strict
// forcing cannot serve.
struct PlanLookup {
  std::shared_ptr<const Plan> plan;
  bool pending = false;
};
PlanLookup resolve_plan(const ConvGeometry& geometry, const BackwardCall* call,
                        const Forcing& forcing = current_forcing());

// ---- Measured decisions ----------------------------------------------------

// What was measured best for one gradient, and why (shown by explain).
struct GradientDecision {
  Strategy strategy = Strategy::aten;
  std::optional<Swap1x1Writer> writer;  // swap1x1 only: the writer measured
  std::string reason;
};

struct Decision {
  std::optional<GradientDecision> input;  // nothing: the rules decide it
  std::optional<GradientDecision> weight;
};

// The plan a decision sets for the geometry, or nullptr where it applies to
// neither gradient (a strategy that cannot serve: a file edited by hand).
std::shared_ptr<const Plan> make_decided_plan(const ConvGeometry& geometry,
                                              const Decision& decision);

// The hook's answer for a call: a decision; "the rules decide"; or "ask
// again next time" (tuning was not possible now: no operands, graph capture...).
struct HookAnswer {
  enum Kind { ask_again, rules, decided } kind = ask_again;
  Decision decision;
};

// Called for a call no cache entry has, with the rules plan (its
// candidates: every strategy that can serve), on a thread marked as tuning.
// Python registers it (python/bwdconv/_tune.py): it answers from the
// decisions file, or tunes on the call's real operands.
using TuningHook =
    std::function<HookAnswer(const ConvGeometry&, const BackwardCall&, const Plan& rules)>;
void set_tuning_hook(TuningHook hook);

// What the hook would answer without being asked, published by Python while
// it does not tune: a call whose input and weight sizes no cached decision
// has gets the rules, so that a process whose shapes keep changing
// (variable sequence lengths, image sizes) does not call into Python for
// each new one. `environment` holds the variables that locate the cache
// file, as they were when it was read (nothing: unset); once one reads
// otherwise, or forget_decisions runs, the hook is asked again.
struct HookShortcut {
  using Environment = std::vector<std::pair<std::string, std::optional<std::string>>>;
  std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> cached_sizes;
  Environment environment;
};
void set_hook_shortcut(HookShortcut shortcut);
bool has_hook_shortcut();

// Whether resolution consults the hook at all (default true); false: the
// rules decide, e.g. for the benchmark's column of the planner's rules.
void use_decisions(bool use);

// Forgets every plan the hook decided, and its shortcut: keys are asked again.
void forget_decisions();

// Whether the calling thread is inside the tuning hook (the tuner's own calls
// are neither tuned again nor counted as served).
bool tuning_on_this_thread();

// Marks the calling thread as the tuner's for good (or not): a thread of the
// tuner's own that measures through the public ops.
void mark_thread_as_tuning(bool tuning);

// ---- Out of memory (docs/DESIGN.md, "Out of memory") ----------------------

// Records that `strategy` ran out of memory computing `gradient` for the
// plan's shape: from now on the shape's plans leave that gradient to aten.
void record_out_of_memory(const Plan& plan, Gradient gradient);

// Forgets which shapes ran out of memory.
void forget_out_of_memory();

}  // namespace bwdconv::ops
