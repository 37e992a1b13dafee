#include "plan.h"

#include <stdexcept>

namespace bwdconv {

const char* strategy_name(Strategy strategy) {
  switch (strategy) {
    case Strategy::aten: return "aten";
  }
  return "unknown";
}

const char* gradient_name(Gradient gradient) {
  return gradient == Gradient::input ? "input" : "weight";
}

std::vector<Strategy> all_strategies() { return {Strategy::aten}; }

std::optional<Strategy> parse_strategy(const std::string& name) {
  for (Strategy strategy : all_strategies()) {
    if (name == strategy_name(strategy)) return strategy;
  }
  return std::nullopt;
}

std::string known_strategy_names() {
  std::string names;
  for (Strategy strategy : all_strategies()) {
    names += (names.empty() ? "" : ", ") + std::string(strategy_name(strategy));
  }
  return names;
}

namespace {

GradientPlan plan_gradient(const ConvGeometry&, Gradient, std::optional<Strategy> forced) {
  if (forced) return {*forced, std::string("forced: ") + strategy_name(*forced)};
  return {Strategy::aten, "aten serves every shape; no specialised strategy is enabled"};
}

}  // namespace

Plan make_plan(const ConvGeometry& geometry, std::optional<Strategy> forced) {
  if (auto error = find_geometry_error(geometry)) throw std::invalid_argument(*error);
  Plan plan;
  plan.geometry = geometry;
  plan.input = plan_gradient(geometry, Gradient::input, forced);
  plan.weight = plan_gradient(geometry, Gradient::weight, forced);
  return plan;
}

}  // namespace bwdconv
