#include "ops/precompiled.h"  // first, as the precompiled header must be

#include "ops/plans.h"

#include <ATen/core/grad_mode.h>
#include <c10/util/Exception.h>

#include <array>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <set>
#include <stdexcept>
#include <unordered_set>

namespace bwdconv::ops {

// ---- Forcing -----------------------------------------------------------------

namespace {

// The forcing packed in one word, so that every call reads it whole without a
// lock: byte 0 the strategy + 1, byte 1 the swap1x1 writer + 1 (0: none),
// bit 16 strict.
std::atomic<uint32_t> packed_forcing{0};

uint32_t pack(const Forcing& forcing) {
  const auto plus_one = [](auto value) { return static_cast<uint32_t>(value) + 1; };
  return (forcing.strategy ? plus_one(*forcing.strategy) : 0) |
         (forcing.swap1x1_writer ? plus_one(*forcing.swap1x1_writer) : 0) << 8 |
         (forcing.strict ? 1u : 0u) << 16;
}

Forcing unpack(uint32_t word) {
  Forcing forcing;
  if (const uint32_t strategy = word & 0xff) forcing.strategy = static_cast<Strategy>(strategy - 1);
  if (const uint32_t writer = (word >> 8) & 0xff) {
    forcing.swap1x1_writer = static_cast<Swap1x1Writer>(writer - 1);
  }
  forcing.strict = (word >> 16) & 1;
  return forcing;
}

}  // namespace

void set_forcing(const Forcing& forcing) {
  packed_forcing = pack(forcing);
  forget_plans();
}

Forcing current_forcing() { return unpack(packed_forcing.load()); }

// ---- Calls -------------------------------------------------------------------

namespace {

thread_local bool tuning_thread = false;
// Set by TransposedForwardRecording; nothing: grad mode and the operands say.
thread_local std::optional<bool> transposed_forward_recorded;

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

BackwardCall forward_backward_call(const at::Tensor& input, const at::Tensor& weight,
                                   const ConvParams& params) {
  return call_without_operands(input, &weight, input.requires_grad(), weight.requires_grad(),
                               params);
}

TransposedForwardRecording::TransposedForwardRecording(const at::Tensor& input,
                                                       const at::Tensor& weight)
    : previous_(transposed_forward_recorded) {
  transposed_forward_recorded = recorded_by_autograd(input, weight);
}

TransposedForwardRecording::~TransposedForwardRecording() {
  transposed_forward_recorded = previous_;
}

bool tuning_on_this_thread() { return tuning_thread; }

void mark_thread_as_tuning(bool tuning) { tuning_thread = tuning; }

// ---- Keys --------------------------------------------------------------------

void CallKey::add_operand(const at::Tensor& tensor) {
  add(tensor.sizes());
  add(static_cast<int64_t>(tensor.scalar_type()) |
      static_cast<int64_t>(tensor.device().type()) << 8 |
      static_cast<int64_t>(tensor.device().index() + 1) << 16 |
      static_cast<int64_t>(tensor.suggest_memory_format()) << 32);
}

void CallKey::add_arguments(const ConvParams& params, c10::IntArrayRef output_padding) {
  add(params.stride);
  add(params.padding);
  add(params.dilation);
  add(output_padding);
  add(params.groups);
}

void CallKey::add_geometry(const ConvGeometry& g) {
  for (const int64_t field :
       {int64_t{g.spatial_dims}, g.batch, g.in_channels, g.out_channels, g.filter_in_channels,
        g.groups, static_cast<int64_t>(g.dtype), static_cast<int64_t>(g.layout),
        static_cast<int64_t>(g.device), int64_t{g.transposed}}) {
    add(field);
  }
  for (const SpatialSizes* sizes :
       {&g.input, &g.filter, &g.output, &g.stride, &g.padding, &g.dilation}) {
    add(c10::IntArrayRef(sizes->data(), g.spatial_dims));
  }
}

// ---- The cache -----------------------------------------------------------------

namespace {

// Epoch 0 marks an empty entry (the count starts at 1).
std::atomic<uint64_t> epoch{1};

// The epoch's low 32 bits: 2^32 changes of forcing, hook or decisions
// before one recurs.
struct Entry {
  uint64_t first = 0, second = 0;
  uint32_t epoch = 0;
  PlanSummary summary;

  bool holds(const CallKey& key, uint64_t current) const {
    return epoch == static_cast<uint32_t>(current) && first == key.first() &&
           second == key.second();
  }
};
static_assert(sizeof(Entry) <= 32, "an entry fits half a cache line");

// A small open-addressed table: a key lives in one of kProbes slots from its
// digest's; a key that finds no free slot replaces its first one. 512 slots
// keep a model's distinct calls: measured on the CPU, a tiny call cycling
// through 200 distinct keys paid +2.0 us (functional scope) and +1.9 us (aten
// scope) over no bwdconv with 128 slots, +1.6 and +0.8 with 512
// (benchmarks/results/cpu-2026-11-27-overhead). The entries and their plans
// stand apart, so that a call planned for aten reads its 32-byte entry alone
// (benchmarks/results/cpu-2026-12-06-plan-cache).
constexpr size_t kSlots = 512;
constexpr size_t kProbes = 4;
struct Table {
  std::array<Entry, kSlots> entries;
  std::array<std::shared_ptr<const Plan>, kSlots> plans;
};

thread_local std::array<Table, 2> tables;

Table& table() { return tables[tuning_thread ? 1 : 0]; }

size_t slot(const CallKey& key, size_t probe) { return (key.first() + probe) % kSlots; }

}  // namespace

PlanSummary PlanSummary::of(const Plan* plan) {
  if (!plan) return {};
  return {plan->input.strategy, plan->weight.strategy, true, plan->input.measured,
          plan->weight.measured};
}

CachedPlan::CachedPlan(const CallKey& key)
    : key_(key), epoch_(epoch.load(std::memory_order_acquire)) {
  const Table& t = table();
  for (size_t probe = 0; probe < kProbes; ++probe) {
    const size_t s = slot(key_, probe);
    if (t.entries[s].holds(key_, epoch_)) {
      found_ = true;
      slot_ = s;
      summary_ = t.entries[s].summary;
      return;
    }
  }
}

std::shared_ptr<const Plan> CachedPlan::plan() const {
  const Table& t = table();
  if (!found_ || !t.entries[slot_].holds(key_, epoch_)) return nullptr;
  return t.plans[slot_];
}

void CachedPlan::keep(std::shared_ptr<const Plan> plan) const {
  Table& t = table();
  size_t chosen = slot(key_, 0);
  for (size_t probe = 0; probe < kProbes; ++probe) {
    const size_t s = slot(key_, probe);
    if (t.entries[s].epoch != static_cast<uint32_t>(epoch_) || t.entries[s].holds(key_, epoch_)) {
      chosen = s;
      break;
    }
  }
  t.entries[chosen] = Entry{key_.first(), key_.second(), static_cast<uint32_t>(epoch_),
                            PlanSummary::of(plan.get())};
  t.plans[chosen] = std::move(plan);
}

void forget_plans() { epoch.fetch_add(1, std::memory_order_acq_rel); }

// ---- Measured decisions ----------------------------------------------------------

namespace {

// Marks the calling thread as tuning for the lifetime of the guard.
class TuningScope {
 public:
  TuningScope() { tuning_thread = true; }
  ~TuningScope() { tuning_thread = false; }
  TuningScope(const TuningScope&) = delete;
  TuningScope& operator=(const TuningScope&) = delete;
};

struct Hook {
  std::mutex mutex;
  TuningHook hook;
  // The published shortcut (set_hook_shortcut): the digests of the cached
  // decisions' sizes; nothing: the hook is asked for every call.
  struct Shortcut {
    std::unordered_set<uint64_t> cached;
    HookShortcut::Environment environment;
  };
  std::optional<Shortcut> shortcut;
  std::atomic<bool> used{true};
};

Hook& hook_state() {
  static Hook instance;
  return instance;
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
// this call (the caller holds the hook's mutex).
bool rules_without_asking(Hook& h, const ConvGeometry& geometry) {
  if (!h.shortcut) return false;
  if (!environment_unchanged(h.shortcut->environment)) {
    h.shortcut.reset();
    return false;
  }
  return !h.shortcut->cached.count(sizes_digest(input_sizes(geometry), weight_sizes(geometry)));
}

// Applies one gradient's decision to a rules plan; false when the strategy
// cannot serve this gradient.
bool apply(Plan& plan, Gradient gradient, const GradientDecision& decision) {
  if (refusal(decision.strategy, gradient, plan.geometry, plan.phases)) return false;
  GradientPlan& chosen = gradient == Gradient::input ? plan.input : plan.weight;
  chosen.strategy = decision.strategy;
  chosen.reason = decision.reason;
  chosen.measured = true;
  return true;
}

// The plan the hook decides for the call (the rules' plan when it lets them
// decide, or asks to be asked again: pending), nullptr when the hook is not
// asked.
PlanLookup decided_plan(const ConvGeometry& geometry, const BackwardCall& call) {
  Hook& h = hook_state();
  if (tuning_thread || !h.used || !(call.wants_input || call.wants_weight)) return {};
  TuningHook hook;
  {
    std::lock_guard<std::mutex> lock(h.mutex);
    if (!h.hook || rules_without_asking(h, geometry)) return {};
    hook = h.hook;
  }
  auto rules = std::make_shared<const Plan>(make_plan(geometry));
  HookAnswer answer;
  {
    TuningScope scope;
    answer = hook(geometry, call, *rules);
  }
  if (answer.kind == HookAnswer::ask_again) return {rules, true};
  if (answer.kind == HookAnswer::decided) {
    if (auto decided = make_decided_plan(geometry, answer.decision)) return {decided, false};
  }
  return {rules, false};
}

}  // namespace

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

void set_tuning_hook(TuningHook hook) {
  Hook& h = hook_state();
  std::lock_guard<std::mutex> lock(h.mutex);
  h.hook = std::move(hook);
  h.shortcut.reset();
  forget_plans();
}

void set_hook_shortcut(HookShortcut shortcut) {
  Hook::Shortcut published{{}, std::move(shortcut.environment)};
  for (const auto& [input, weight] : shortcut.cached_sizes) {
    published.cached.insert(sizes_digest(input, weight));
  }
  Hook& h = hook_state();
  std::lock_guard<std::mutex> lock(h.mutex);
  h.shortcut = std::move(published);
}

bool has_hook_shortcut() {
  Hook& h = hook_state();
  std::lock_guard<std::mutex> lock(h.mutex);
  return h.shortcut.has_value();
}

void use_decisions(bool use) {
  hook_state().used = use;
  forget_plans();
}

void forget_decisions() {
  Hook& h = hook_state();
  std::lock_guard<std::mutex> lock(h.mutex);
  h.shortcut.reset();
  forget_plans();
}

// ---- Out of memory -------------------------------------------------------------

namespace {

// (shape, gradient) of every shape whose strategy ran out of memory; the
// flag keeps plans free of any lookup until the first one.
struct OutOfMemoryRecord {
  std::mutex mutex;
  std::set<std::pair<CallKey, Gradient>> shapes;
  std::atomic<bool> any{false};
};

OutOfMemoryRecord& out_of_memory() {
  static OutOfMemoryRecord instance;
  return instance;
}

CallKey shape_key(const ConvGeometry& geometry) {
  CallKey key;
  key.add_geometry(geometry);
  return key;
}

// `plan`, or a copy whose gradients planned for a strategy that ran out of
// memory on this shape are aten's.
std::shared_ptr<const Plan> avoiding_out_of_memory(std::shared_ptr<const Plan> plan) {
  OutOfMemoryRecord& r = out_of_memory();
  if (!r.any.load()) return plan;
  const CallKey key = shape_key(plan->geometry);
  std::shared_ptr<Plan> avoided;
  std::lock_guard<std::mutex> lock(r.mutex);
  for (Gradient gradient : {Gradient::input, Gradient::weight}) {
    const GradientPlan& planned = plan->of(gradient);
    if (planned.strategy == Strategy::aten || !r.shapes.count({key, gradient})) continue;
    if (!avoided) avoided = std::make_shared<Plan>(*plan);
    GradientPlan& replaced = gradient == Gradient::input ? avoided->input : avoided->weight;
    replaced.reason = std::string("aten: ") + strategy_name(planned.strategy) +
                      " ran out of memory on this shape in this process (planned: " +
                      planned.reason + ")";
    replaced.strategy = Strategy::aten;
    replaced.measured = false;
  }
  return avoided ? std::shared_ptr<const Plan>(std::move(avoided)) : plan;
}

}  // namespace

void record_out_of_memory(const Plan& plan, Gradient gradient) {
  OutOfMemoryRecord& r = out_of_memory();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.shapes.insert({shape_key(plan.geometry), gradient});
  r.any = true;
  forget_plans();
}

void forget_out_of_memory() {
  OutOfMemoryRecord& r = out_of_memory();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.shapes.clear();
  r.any = false;
  forget_plans();
}

// ---- Resolution ------------------------------------------------------------------

namespace {

// The rules' plan under `forcing`.
std::shared_ptr<const Plan> rules_plan(const ConvGeometry& geometry, const Forcing& forcing) {
  try {
    return std::make_shared<const Plan>(
        make_plan(geometry, forcing.strategy, forcing.swap1x1_writer, forcing.strict));
  } catch (const std::invalid_argument& error) {
    TORCH_CHECK_VALUE(false, "bwdconv: ", error.what());
  }
}

PlanLookup uncached_plan(const ConvGeometry& geometry, const BackwardCall* call,
                         const Forcing& forcing) {
  if (call && !forcing.strategy && !forcing.swap1x1_writer) {
    PlanLookup decided = decided_plan(geometry, *call);
    if (decided.plan) return decided;
  }
  return {rules_plan(geometry, forcing), false};
}

// The geometry, what else can change a plan or a measurement (the weight's
// layout, the wanted gradients, whether a transposed forward's backward
// follows it, the device index) and the forcing.
CallKey resolution_key(const ConvGeometry& geometry, const BackwardCall* call,
                       const Forcing& forcing) {
  CallKey key;
  key.add(static_cast<int64_t>(KeyTag::resolution));
  key.add_geometry(geometry);
  key.add(pack(forcing));
  if (call) {
    key.add(call->weight_layout ? static_cast<int64_t>(*call->weight_layout) : -1);
    key.add(int64_t{call->wants_input} | int64_t{call->wants_weight} << 1 |
            int64_t{call->records_autograd} << 2);
    key.add(call->device_index);
  }
  return key;
}

}  // namespace

PlanLookup resolve_plan(const ConvGeometry& geometry, const BackwardCall* call,
                        const Forcing& forcing) {
  const CachedPlan cached(resolution_key(geometry, call, forcing));
  if (cached.found()) return {cached.plan(), false};  // never "not planned": a geometry
  PlanLookup made = uncached_plan(geometry, call, forcing);
  made.plan = avoiding_out_of_memory(std::move(made.plan));
  if (!made.pending) cached.keep(made.plan);
  return made;
}

}  // namespace bwdconv::ops
