#include "ops/precompiled.h"  // first, as the precompiled header must be

#include "ops/backward.h"

#include <ATen/ops/convolution_native.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <iterator>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include "ops/aten.h"
#include "ops/aten_scope.h"
#include "ops/decisions.h"
#include "ops/out_of_memory.h"
#include "ops/route_cache.h"
#include "ops/strategies.h"

namespace bwdconv::ops {
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

using Counts = std::array<std::array<std::atomic<int64_t>, kStrategyCount>, 3>;
Counts served{};
Counts served_measured{};  // the part of `served` that a measured decision chose

std::atomic<int64_t>& counter(Counts& counts, Served served, Strategy strategy) {
  return counts[static_cast<size_t>(served)][static_cast<size_t>(strategy)];
}

}  // namespace

// The tuner's own runs are not counted.
const char* served_name(Served what) {
  switch (what) {
    case Served::input: return "input";
    case Served::weight: return "weight";
    case Served::forward: return "forward";
  }
  return "?";
}

void count_served(Served what, Strategy strategy, bool measured) {
  if (tuning_on_this_thread()) return;
  counter(served, what, strategy)++;
  if (measured) counter(served_measured, what, strategy)++;
}

void count_served(Served what, const GradientPlan& plan) {
  count_served(what, plan.strategy, plan.measured);
}

void set_forcing(const Forcing& forcing) {
  packed_forcing = pack(forcing);
  forget_aten_calls();
}

Forcing current_forcing() { return unpack(packed_forcing.load()); }

int64_t served_count(Served what, Strategy strategy, bool measured_only) {
  return counter(measured_only ? served_measured : served, what, strategy).load();
}

void reset_served_counts() {
  for (Counts* counts : {&served, &served_measured}) {
    for (auto& per_gradient : *counts) {
      for (auto& count : per_gradient) count.store(0);
    }
  }
}

std::vector<int64_t> plan_key(const ConvGeometry& g, const Forcing& forcing,
                              size_t extra_capacity) {
  const int64_t fields[] = {
      g.spatial_dims,
      g.batch,
      g.in_channels,
      g.out_channels,
      g.filter_in_channels,
      g.groups,
      static_cast<int64_t>(g.dtype),
      static_cast<int64_t>(g.layout),
      static_cast<int64_t>(g.device),
      forcing.strategy ? static_cast<int64_t>(*forcing.strategy) : -1,
      forcing.swap1x1_writer ? static_cast<int64_t>(*forcing.swap1x1_writer) : -1,
      forcing.strict ? 1 : 0,
      g.transposed ? 1 : 0};
  const SpatialSizes* lists[] = {&g.input,  &g.filter,  &g.output,
                                 &g.stride, &g.padding, &g.dilation};
  std::vector<int64_t> key;  // allocated once: it is built on every call
  key.reserve(std::size(fields) + std::size(lists) * g.spatial_dims + extra_capacity);
  key.insert(key.end(), std::begin(fields), std::end(fields));
  for (const SpatialSizes* sizes : lists) {
    key.insert(key.end(), sizes->begin(), sizes->begin() + g.spatial_dims);
  }
  return key;
}

size_t PlanKeyHash::operator()(const std::vector<int64_t>& key) const {
  // FNV-1a over the fields: a collision only costs an equality check.
  uint64_t hash = 14695981039346656037ull;
  for (int64_t field : key) hash = (hash ^ static_cast<uint64_t>(field)) * 1099511628211ull;
  return static_cast<size_t>(hash);
}

namespace {

// Plans are pure functions of their key: made once per shape, then shared.
struct PlanCache {
  static constexpr size_t kCapacity = 4096;
  std::mutex mutex;
  std::unordered_map<std::vector<int64_t>, std::shared_ptr<const Plan>, PlanKeyHash> plans;
};

PlanCache& plan_cache() {
  static PlanCache instance;
  return instance;
}

// The rules' plan under `forcing`, cached per key.
std::shared_ptr<const Plan> rules_plan(const ConvGeometry& geometry, const Forcing& forcing) {
  auto key = plan_key(geometry, forcing);
  PlanCache& cache = plan_cache();
  {
    std::lock_guard<std::mutex> lock(cache.mutex);
    if (auto it = cache.plans.find(key); it != cache.plans.end()) return it->second;
  }
  std::shared_ptr<const Plan> plan;
  try {
    plan = std::make_shared<const Plan>(
        make_plan(geometry, forcing.strategy, forcing.swap1x1_writer, forcing.strict));
  } catch (const std::invalid_argument& error) {
    TORCH_CHECK_VALUE(false, "bwdconv: ", error.what());
  }
  std::lock_guard<std::mutex> lock(cache.mutex);
  if (cache.plans.size() >= PlanCache::kCapacity) cache.plans.clear();
  cache.plans.emplace(std::move(key), plan);
  return plan;
}

}  // namespace

PlanLookup resolve_plan(const ConvGeometry& geometry, const BackwardCall* call,
                        const Forcing& forcing) {
  if (call && !forcing.strategy && !forcing.swap1x1_writer) {
    DecisionLookup decision = look_up_decision(geometry, *call);
    if (decision.plan) return {avoiding_out_of_memory(std::move(decision.plan)), false};
    if (decision.pending) return {avoiding_out_of_memory(rules_plan(geometry, forcing)), true};
  }
  return {avoiding_out_of_memory(rules_plan(geometry, forcing)), false};
}

std::shared_ptr<const Plan> aten_only_plan(const ConvGeometry& geometry,
                                           const BackwardCall& call) {
  PlanLookup lookup = resolve_plan(geometry, &call);
  if (lookup.pending) return nullptr;
  const Plan& plan = *lookup.plan;
  const bool aten_only = (!call.wants_input || plan.input.strategy == Strategy::aten) &&
                         (!call.wants_weight || plan.weight.strategy == Strategy::aten);
  return aten_only ? std::move(lookup.plan) : nullptr;
}

at::Tensor compute_grad_bias(const at::Tensor& grad_output) {
  std::vector<int64_t> dims{0};
  for (int64_t d = 2; d < grad_output.dim(); ++d) dims.push_back(d);
  return grad_output.sum(dims);
}

namespace {

// `gradient` as aten computes it. `counterpart`, where the call has it, is its
// other operand (the input for the input gradient, the weight for the weight
// gradient): aten then gets the call's real operands. Without it the aten
// strategy gives aten a stand-in of that operand, on a GPU an allocation of
// its size (docs/DESIGN.md, "aten").
at::Tensor by_aten(Gradient gradient, const Plan& plan, const at::Tensor& grad_output,
                   const at::Tensor& operand, const at::Tensor* counterpart,
                   at::MemoryFormat format) {
  if (counterpart == nullptr) {
    return implementation(Strategy::aten, gradient)(plan, grad_output, operand, format);
  }
  const bool want_input = gradient == Gradient::input;
  return aten_gradient(grad_output, want_input ? *counterpart : operand,
                       want_input ? operand : *counterpart, geometry_params(plan.geometry),
                       want_input);
}

// The planned strategy's `gradient`; aten's where the strategy runs out of
// memory (out_of_memory.h).
at::Tensor compute(Gradient gradient, const Plan& plan, const at::Tensor& grad_output,
                   const at::Tensor& operand, const at::Tensor* counterpart,
                   at::MemoryFormat format, Served counted_as) {
  const Strategy strategy = plan.of(gradient).strategy;
  const GradientFn fn = implementation(strategy, gradient);
  TORCH_INTERNAL_ASSERT(fn != nullptr, strategy_name(strategy), " planned for the ",
                        gradient_name(gradient), " gradient");
  const auto aten = [&] {
    return by_aten(gradient, plan, grad_output, operand, counterpart, format);
  };
  bool fell_back = false;
  at::Tensor result = aten_if_out_of_memory(
      gradient, plan,
      [&] {
        return corrupted_if_asked(strategy, strategy == Strategy::aten
                                                ? aten()
                                                : fn(plan, grad_output, operand, format));
      },
      [&] {
        fell_back = true;
        return aten();
      });
  count_served(counted_as, fell_back ? GradientPlan{} : plan.of(gradient));
  return in_layout(result, format);
}

}  // namespace

at::Tensor compute_grad_input(const Plan& plan, const at::Tensor& grad_output,
                              const at::Tensor& weight) {
  return compute(Gradient::input, plan, grad_output, weight, nullptr,
                 op_gradient_memory_format(grad_output, weight), Served::input);
}

at::Tensor compute_grad_weight(const Plan& plan, const at::Tensor& grad_output,
                               const at::Tensor& input) {
  return compute(Gradient::weight, plan, grad_output, input, nullptr,
                 op_gradient_memory_format(input, grad_output), Served::weight);
}

at::Tensor compute_transposed_forward(const Plan& plan, const at::Tensor& input,
                                      const at::Tensor& weight,
                                      const std::optional<at::Tensor>& bias,
                                      at::IntArrayRef output_padding) {
  if (plan.input.strategy == Strategy::aten) {
    count_served(Served::forward, plan.input);
    const ConvParams p = geometry_params(plan.geometry);
    // aten's composite itself: the aten scope's kernel for aten::convolution
    // would plan this call again.
    return at::native::convolution(input, weight, bias, p.stride, p.padding, p.dilation,
                                   /*transposed=*/true, output_padding, p.groups);
  }
  // Laid out by PyTorch's meta rule, then as aten's backend lays it out (as
  // aten.convolution's fake, which bwdconv's fake is, lays it out too).
  at::Tensor output = compute(Gradient::input, plan, input, weight, nullptr,
                              gradient_memory_format(input, weight), Served::forward);
  if (bias && bias->defined()) {
    std::vector<int64_t> per_channel(output.dim(), 1);
    per_channel[1] = -1;
    output.add_(bias->view(per_channel));
  }
  return in_atens_transposed_layout(output, input, weight, bias, geometry_params(plan.geometry),
                                    output_padding);
}

std::pair<at::Tensor, at::Tensor> compute_grads(const Plan& plan, const at::Tensor& grad_output,
                                                const at::Tensor& input, const at::Tensor& weight) {
  if (plan.input.strategy != Strategy::aten || plan.weight.strategy != Strategy::aten) {
    // Each gradient alone, aten's (planned, or where a strategy runs out of
    // memory) from the call's real operands.
    at::Tensor grad_input = compute(Gradient::input, plan, grad_output, weight, &input,
                                    op_gradient_memory_format(grad_output, weight),
                                    Served::input);
    return {std::move(grad_input),
            compute(Gradient::weight, plan, grad_output, input, &weight,
                    op_gradient_memory_format(input, grad_output), Served::weight)};
  }
  count_served(Served::input, plan.input);
  count_served(Served::weight, plan.weight);
  auto [grad_input, grad_weight] =
      aten_grads(grad_output, input, weight, geometry_params(plan.geometry));
  return {in_layout(grad_input, op_gradient_memory_format(grad_output, weight)),
          in_layout(grad_weight, op_gradient_memory_format(input, grad_output))};
}

}  // namespace bwdconv::ops
