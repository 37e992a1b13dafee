#include "ops/precompiled.h"  // first, as the precompiled header must be

#include "ops/strategies.h"

#include <array>
#include <atomic>

#include "ops/aten.h"
#include "ops/phase.h"
#include "ops/phase_stacked.h"
#include "ops/relayout.h"
#include "ops/scatter.h"
#include "ops/splitk.h"
#include "ops/swap1x1.h"

namespace bwdconv::ops {
namespace {

struct Implementation {
  Strategy strategy;
  GradientFn input;   // nullptr: the strategy does not compute it
  GradientFn weight;
};

// What implementation() returns: kImplementations' functions, or a test's
// stand-ins (replace_implementation).
using Table = std::array<std::array<std::atomic<GradientFn>, 2>, kStrategyCount>;

// Indexed by Strategy, like kStrategies.
constexpr std::array<Implementation, kStrategyCount> kImplementations{{
    {Strategy::aten, aten_grad_input, aten_grad_weight},
    {Strategy::swap1x1, swap1x1_grad_input, nullptr},
    {Strategy::scatter, scatter_grad_input, nullptr},
    {Strategy::phase, phase_grad_input, nullptr},
    {Strategy::phase_stacked, phase_stacked_grad_input, nullptr},
    {Strategy::splitk, nullptr, splitk_grad_weight},
    {Strategy::relayout, relayout_grad_input, relayout_grad_weight},
}};

// Every registered strategy has exactly the implementations its entry says it computes.
constexpr bool implements_the_registry() {
  for (size_t i = 0; i < kStrategyCount; ++i) {
    const Implementation& impl = kImplementations[i];
    if (impl.strategy != kStrategies[i].strategy) return false;
    if ((impl.input != nullptr) != kStrategies[i].computes_input) return false;
    if ((impl.weight != nullptr) != kStrategies[i].computes_weight) return false;
  }
  return true;
}
static_assert(implements_the_registry(),
              "kImplementations must follow kStrategies: one function per gradient computed");

Table& table() {
  static Table* instance = [] {
    auto* t = new Table();
    for (size_t i = 0; i < kStrategyCount; ++i) {
      (*t)[i][0] = kImplementations[i].input;
      (*t)[i][1] = kImplementations[i].weight;
    }
    return t;
  }();
  return *instance;
}

std::atomic<GradientFn>& entry(Strategy strategy, Gradient gradient) {
  return table()[static_cast<size_t>(strategy)][gradient == Gradient::input ? 0 : 1];
}

}  // namespace

GradientFn implementation(Strategy strategy, Gradient gradient) {
  return entry(strategy, gradient).load(std::memory_order_relaxed);
}

GradientFn replace_implementation(Strategy strategy, Gradient gradient, GradientFn fn) {
  return entry(strategy, gradient).exchange(fn);
}

}  // namespace bwdconv::ops
