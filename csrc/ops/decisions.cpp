#include "ops/precompiled.h"  // first, as the precompiled header must be

#include "ops/decisions.h"

#include <ATen/core/grad_mode.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ops/backward.h"
#include "ops/route_cache.h"

namespace bwdconv::ops {
namespace {

thread_local bool tuning_thread = false;
// Set by TransposedForwardRecording; nothing: grad mode and the operands say.
thread_local std::optional<bool> transposed_forward_recorded;
std::atomic<bool> decisions_used{true};

// Marks the calling thread as tuning for the lifetime of the guard.
class TuningScope {
 public:
  TuningScope() { tuning_thread = true; }
  ~TuningScope() { tuning_thread = false; }
  TuningScope(const TuningScope&) = delete;
  TuningScope& operator=(const TuningScope&) = delete;
};

// Per key, the plan a call gets: the measured decision's, or the rules' when
// they decide the key (so that a call needs this one lookup).
struct DecisionTable {
  struct Entry {
    std::shared_ptr<const Plan> plan;
    bool measured = false;
  };
  static constexpr size_t kCapacity = 4096;
  std::mutex mutex;
  std::unordered_map<std::vector<int64_t>, Entry, PlanKeyHash> plans;
  TuningHook hook;
  // The published shortcut (set_hook_shortcut): the digests of the cached
  // decisions' sizes; nothing: the hook is asked for every unseen key.
  struct Shortcut {
    std::unordered_set<uint64_t> cached;
    HookShortcut::Environment environment;
  };
  std::optional<Shortcut> shortcut;
};

DecisionTable& table() {
  static DecisionTable instance;
  return instance;
}

// The plan key, then what else can change a measurement: the weight's layout
// (-1 without a weight tensor), which gradients are wanted (and whether a
// transposed forward's backward follows it), the device index.
std::vector<int64_t> decision_key(const ConvGeometry& geometry, const BackwardCall& call) {
  std::vector<int64_t> key = plan_key(geometry, Forcing{}, /*extra_capacity=*/3);
  key.push_back(call.weight_layout ? static_cast<int64_t>(*call.weight_layout) : -1);
  key.push_back(int64_t{call.wants_input} | (int64_t{call.wants_weight} << 1) |
                (int64_t{call.records_autograd} << 2));
  key.push_back(call.device_index);
  return key;
}

// A digest of a call's input and weight sizes (a collision only asks the hook).
uint64_t sizes_digest(c10::IntArrayRef input, c10::IntArrayRef weight) {
  CallKey key;
  key.add(input);
  key.add(weight);
  return key.first();
}

bool environment_unchanged(const HookShortcut::Environment& environment) {
  for (const auto& [name, value] : environment) {
    const char* now = std::getenv(name.c_str());
    if (now ? !value || value->compare(now) != 0 : value.has_value()) return false;
  }
  return true;
}

// Whether the published shortcut says the hook would let the rules decide
// this call (the caller holds the table's mutex).
bool rules_without_asking(DecisionTable& t, const ConvGeometry& geometry) {
  if (!t.shortcut) return false;
  if (!environment_unchanged(t.shortcut->environment)) {
    t.shortcut.reset();
    return false;
  }
  return !t.shortcut->cached.count(sizes_digest(input_sizes(geometry), weight_sizes(geometry)));
}

// Applies one gradient's decision to a rules plan; false when the strategy
// cannot serve this gradient (a decision from a file edited by hand).
bool apply(Plan& plan, Gradient gradient, const GradientDecision& decision) {
  if (refusal(decision.strategy, gradient, plan.geometry, plan.phases)) return false;
  GradientPlan& chosen = gradient == Gradient::input ? plan.input : plan.weight;
  chosen.strategy = decision.strategy;
  chosen.reason = decision.reason;
  chosen.measured = true;
  return true;
}

std::shared_ptr<const Plan> make_decided_plan(const ConvGeometry& geometry,
                                              const Decision& decision) {
  Plan plan = make_plan(geometry);
  bool applied = false;
  if (decision.input) {
    if (decision.input->strategy == Strategy::swap1x1) {
      if (!plan.swap1x1) return nullptr;
      try {
        plan.swap1x1 = choose_swap1x1_writer(geometry, decision.input->writer);
      } catch (const std::invalid_argument&) {
        return nullptr;
      }
    }
    applied |= apply(plan, Gradient::input, *decision.input);
  }
  if (decision.weight) applied |= apply(plan, Gradient::weight, *decision.weight);
  return applied ? std::make_shared<const Plan>(std::move(plan)) : nullptr;
}

// The corrupted strategy's index, or -1.
std::atomic<int> corrupted_strategy{-1};

// A call's key fields; `on_device` is any operand (they share a device).
BackwardCall call_without_operands(const at::Tensor& on_device, const at::Tensor* weight,
                                   bool wants_input, bool wants_weight,
                                   const ConvParams& params) {
  BackwardCall call;
  call.wants_input = wants_input;
  call.wants_weight = wants_weight;
  if (weight && wants_input) {  // only the input gradient reads the weight's layout
    call.weight_layout = weight->suggest_memory_format() == at::MemoryFormat::Contiguous
                             ? MemoryLayout::Contiguous
                             : MemoryLayout::ChannelsLast;
  }
  call.device_index = on_device.is_cuda() ? on_device.device().index() : -1;
  call.params = params;
  return call;
}

bool recorded_by_autograd(const at::Tensor& input, const at::Tensor& weight) {
  return at::GradMode::is_enabled() && (input.requires_grad() || weight.requires_grad());
}

}  // namespace

BackwardCall backward_call(const at::Tensor& grad_output, const at::Tensor* input,
                           const at::Tensor* weight, bool wants_input, bool wants_weight,
                           const ConvParams& params) {
  BackwardCall call = call_without_operands(grad_output, weight, wants_input, wants_weight,
                                            params);
  call.grad_output = &grad_output;
  call.input = input;
  call.weight = weight;
  return call;
}

BackwardCall transposed_forward_call(const at::Tensor& input, const at::Tensor& weight,
                                     const ConvParams& params) {
  BackwardCall call = backward_call(input, nullptr, &weight, true, false, params);
  call.records_autograd =
      transposed_forward_recorded.value_or(recorded_by_autograd(input, weight));
  return call;
}

TransposedForwardRecording::TransposedForwardRecording(const at::Tensor& input,
                                                       const at::Tensor& weight)
    : previous_(transposed_forward_recorded) {
  transposed_forward_recorded = recorded_by_autograd(input, weight);
}

TransposedForwardRecording::~TransposedForwardRecording() {
  transposed_forward_recorded = previous_;
}

BackwardCall forward_backward_call(const at::Tensor& input, const at::Tensor& weight,
                                   const ConvParams& params) {
  return call_without_operands(input, &weight, input.requires_grad(), weight.requires_grad(),
                               params);
}

void set_tuning_hook(TuningHook hook) {
  std::lock_guard<std::mutex> lock(table().mutex);
  table().hook = std::move(hook);
  table().shortcut.reset();
  forget_aten_calls();
}

void set_hook_shortcut(HookShortcut shortcut) {
  DecisionTable::Shortcut published{{}, std::move(shortcut.environment)};
  for (const auto& [input, weight] : shortcut.cached_sizes) {
    published.cached.insert(sizes_digest(input, weight));
  }
  std::lock_guard<std::mutex> lock(table().mutex);
  table().shortcut = std::move(published);
}

bool has_hook_shortcut() {
  std::lock_guard<std::mutex> lock(table().mutex);
  return table().shortcut.has_value();
}

bool tuning_on_this_thread() { return tuning_thread; }

void mark_thread_as_tuning(bool tuning) { tuning_thread = tuning; }

void use_decisions(bool use) {
  decisions_used = use;
  forget_aten_calls();
}

void forget_decisions(bool clear) {
  DecisionTable& t = table();
  std::lock_guard<std::mutex> lock(t.mutex);
  forget_aten_calls();
  t.shortcut.reset();
  if (clear) {
    t.plans.clear();
    return;
  }
  for (auto it = t.plans.begin(); it != t.plans.end();) {
    it = it->second.measured ? std::next(it) : t.plans.erase(it);
  }
}

DecisionLookup look_up_decision(const ConvGeometry& geometry, const BackwardCall& call) {
  if (tuning_thread || !decisions_used || !(call.wants_input || call.wants_weight)) return {};
  DecisionTable& t = table();
  auto key = decision_key(geometry, call);
  TuningHook hook;
  {
    std::lock_guard<std::mutex> lock(t.mutex);
    if (auto it = t.plans.find(key); it != t.plans.end()) return {it->second.plan, false};
    if (!t.hook || rules_without_asking(t, geometry)) return {};
    hook = t.hook;
  }
  auto rules = std::make_shared<const Plan>(make_plan(geometry));
  HookAnswer answer;
  {
    TuningScope scope;
    answer = hook(geometry, call, *rules);
  }
  if (answer.kind == HookAnswer::ask_again) return {nullptr, true};
  DecisionTable::Entry entry{rules, false};
  if (answer.kind == HookAnswer::decided) {
    if (auto decided = make_decided_plan(geometry, answer.decision)) entry = {decided, true};
  }
  std::lock_guard<std::mutex> lock(t.mutex);
  if (t.plans.size() >= DecisionTable::kCapacity) t.plans.clear();
  t.plans.insert_or_assign(std::move(key), entry);
  // A memoised call may have been planned before this decision (the rules'
  // answer changes no memoised route).
  if (entry.measured) forget_aten_calls();
  return {entry.plan, false};
}

at::Tensor gradient_with(Gradient gradient, Strategy strategy,
                         std::optional<Swap1x1Writer> writer, const at::Tensor& grad_output,
                         const at::Tensor& operand, at::IntArrayRef sizes,
                         const ConvParams& params) {
  const bool input = gradient == Gradient::input;
  const ConvGeometry geometry = backward_geometry(
      "bwdconv gradient_with", grad_output, input ? sizes : operand.sizes(),
      input ? operand.sizes() : sizes, input ? "weight" : "input", operand, params);
  Plan plan;
  try {
    plan = make_plan(geometry, strategy, writer);
  } catch (const std::invalid_argument& error) {
    TORCH_CHECK_VALUE(false, "bwdconv: ", error.what());
  }
  TORCH_CHECK_VALUE(plan.of(gradient).strategy == strategy, "bwdconv: ", strategy_name(strategy),
                    " cannot compute the ", gradient_name(gradient), " gradient of this shape");
  return input ? compute_grad_input(plan, grad_output, operand)
               : compute_grad_weight(plan, grad_output, operand);
}

std::pair<at::Tensor, at::Tensor> gradients_with(const Decision& decision,
                                                 const at::Tensor& grad_output,
                                                 const at::Tensor& input, const at::Tensor& weight,
                                                 const ConvParams& params) {
  const ConvGeometry geometry =
      backward_geometry("bwdconv gradients_with", grad_output, input.sizes(), weight.sizes(),
                        "weight", weight, params);
  const auto plan = make_decided_plan(geometry, decision);
  TORCH_CHECK_VALUE(plan && decision.input && decision.weight,
                    "bwdconv: a decision for both gradients that this shape can serve is needed");
  return compute_grads(*plan, grad_output, input, weight);
}

void set_corrupted_strategy(std::optional<Strategy> strategy) {
  corrupted_strategy = strategy ? static_cast<int>(*strategy) : -1;
}

at::Tensor corrupted_if_asked(Strategy strategy, at::Tensor gradient) {
  if (corrupted_strategy.load() != static_cast<int>(strategy)) return gradient;
  return gradient.add(1);
}

}  // namespace bwdconv::ops
