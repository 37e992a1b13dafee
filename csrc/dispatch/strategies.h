// The strategy registry: the one list of strategies. Each entry gives the
// strategy's name (the word used in code, CLI, environment and docs), the
// gradients it computes, why it refuses a geometry and whether it gives the
// same bits on every call. Everything else that walks strategies (the
// planner, explain, served counts, csrc/ops' implementation table, Python's
// bwdconv.strategies(), the bench and the tests) reads this table.
//
// Adding a strategy: a Strategy value and its entry below, its planner file
// in csrc/dispatch (geometry, refusal) and its implementation in csrc/ops
// (registered in ops/strategies.cpp). (docs/DESIGN.md, "Adding a strategy").
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "geometry.h"
#include "phase.h"
#include "phase_stacked.h"
#include "relayout.h"
#include "swap1x1.h"

namespace bwdconv {

enum class Strategy { aten, swap1x1, scatter, phase, phase_stacked, splitk, relayout };

enum class Gradient { input, weight };

// Why a strategy cannot serve a geometry (for a gradient it computes), or
// nothing when it can. The phases are enumerate_phases(geometry).
using Refusal = std::optional<std::string> (*)(const ConvGeometry& geometry,
                                               const std::vector<Phase>& phases);

// The same bits on every call with the same operands when PyTorch's
// deterministic algorithms are on (torch.use_deterministic_algorithms; on the
// CPU with the same number of threads), per device kind.
struct Determinism {
  bool cpu = false;
  bool gpu = false;
};

struct StrategyEntry {
  Strategy strategy;
  const char* name;
  bool computes_input;
  bool computes_weight;
  Refusal refusal;
  Determinism deterministic;
  const char* kernel;  // the csrc/hip kernel it launches on a GPU (<kernel>.cu), or nullptr
};

std::optional<std::string> serves_every_geometry(const ConvGeometry& geometry,
                                                 const std::vector<Phase>& phases);

// aten: PyTorch asks its backends (cuDNN, MIOpen, oneDNN) for deterministic
// algorithms under the flag. swap1x1, phase and phase_stacked: aten GEMMs or
// stride-1 convolutions, then an interleave that writes each dx element once.
// scatter: a pass that writes each buffer element once, then an aten stride-1
// convolution. splitk: aten weight gradients of the chunks, summed into fp32
// in a fixed order.
// relayout: aten's own algorithms, in channels_last, under the same flag.
// A strategy accumulating with atomics on GPUs would say {true, false}.
inline constexpr std::array<StrategyEntry, 7> kStrategies{{
    {Strategy::aten, "aten", true, true, serves_every_geometry, {true, true}, nullptr},
    {Strategy::swap1x1, "swap1x1", true, false, swap1x1_refusal, {true, true}, "interleave"},
    {Strategy::scatter, "scatter", true, false, serves_every_geometry, {true, true}, "scatter"},
    {Strategy::phase, "phase", true, false, serves_every_geometry, {true, true}, "interleave"},
    {Strategy::phase_stacked, "phase_stacked", true, false, phase_stacked_refusal,
     {true, true}, "interleave"},
    {Strategy::splitk, "splitk", false, true, serves_every_geometry, {true, true}, nullptr},
    {Strategy::relayout, "relayout", true, true, relayout_refusal, {true, true}, "relayout"},
}};

inline constexpr size_t kStrategyCount = kStrategies.size();

constexpr bool entries_follow_the_enum() {
  for (size_t i = 0; i < kStrategyCount; ++i) {
    if (static_cast<size_t>(kStrategies[i].strategy) != i) return false;
    if (!kStrategies[i].computes_input && !kStrategies[i].computes_weight) return false;
  }
  return true;
}
static_assert(entries_follow_the_enum(),
              "kStrategies lists every Strategy once, in enum order, each computing a gradient");

constexpr const StrategyEntry& entry(Strategy strategy) {
  return kStrategies[static_cast<size_t>(strategy)];
}

constexpr bool computes(Strategy strategy, Gradient gradient) {
  return gradient == Gradient::input ? entry(strategy).computes_input
                                     : entry(strategy).computes_weight;
}

// Whether `strategy` gives the same bits on every run on `device` when
// PyTorch's deterministic algorithms are on (the autotuner's candidates under
// torch.use_deterministic_algorithms(True)).
constexpr bool deterministic_on(Strategy strategy, DeviceKind device) {
  return device == DeviceKind::CPU ? entry(strategy).deterministic.cpu
                                   : entry(strategy).deterministic.gpu;
}

const char* strategy_name(Strategy strategy);
const char* gradient_name(Gradient gradient);
// The strategy called `name`, or nothing when no strategy has that name.
std::optional<Strategy> parse_strategy(const std::string& name);
// "aten, swap1x1, ...": for error messages.
std::string known_strategy_names();
// Every strategy, in registry order.
constexpr std::array<Strategy, kStrategyCount> all_strategies() {
  std::array<Strategy, kStrategyCount> strategies{};
  for (size_t i = 0; i < kStrategyCount; ++i) strategies[i] = kStrategies[i].strategy;
  return strategies;
}

// Why `strategy` cannot compute `gradient` of the geometry, or nothing when it can.
std::optional<std::string> refusal(Strategy strategy, Gradient gradient,
                                   const ConvGeometry& geometry,
                                   const std::vector<Phase>& phases);

}  // namespace bwdconv
