#include "strategies.h"

namespace bwdconv {

std::optional<std::string> serves_every_geometry(const ConvGeometry&, const std::vector<Phase>&) {
  return std::nullopt;
}

const char* strategy_name(Strategy strategy) { return entry(strategy).name; }

const char* gradient_name(Gradient gradient) {
  return gradient == Gradient::input ? "input" : "weight";
}

std::optional<Strategy> parse_strategy(const std::string& name) {
  for (const StrategyEntry& e : kStrategies) {
    if (name == e.name) return e.strategy;
  }
  return std::nullopt;
}

std::string known_strategy_names() {
  std::string names;
  for (const StrategyEntry& e : kStrategies) {
    names += (names.empty() ? "" : ", ") + std::string(e.name);
  }
  return names;
}

namespace {

// A batch, channels or spatial size of zero (a transposed convolution's
// empty output is its matching convolution's empty input): nothing to
// compute, and aten's to make.
bool empty_geometry(const ConvGeometry& g) {
  if (g.batch <= 0 || g.in_channels <= 0 || g.out_channels <= 0) return true;
  for (int i = 0; i < g.spatial_dims; ++i) {
    if (g.input[i] <= 0 || g.output[i] <= 0) return true;
  }
  return false;
}

}  // namespace

std::optional<std::string> refusal(Strategy strategy, Gradient gradient, const ConvGeometry& g,
                                   const std::vector<Phase>& phases) {
  if (!computes(strategy, gradient)) {
    return gradient == Gradient::input ? "computes the weight gradient only"
                                       : "computes the input gradient only";
  }
  if (strategy != Strategy::aten && empty_geometry(g)) return "an empty tensor is aten's to make";
  return entry(strategy).refusal(g, phases);
}

}  // namespace bwdconv
