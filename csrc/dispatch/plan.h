// The planner: which strategy computes each gradient of a convolution, and why.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "geometry.h"

namespace bwdconv {

// Strategy names are the words used in code, CLI, environment and docs.
enum class Strategy { aten };
constexpr size_t kStrategyCount = 1;  // the number of Strategy values

enum class Gradient { input, weight };

const char* strategy_name(Strategy strategy);
const char* gradient_name(Gradient gradient);
// The strategy called `name`, or nothing when no strategy has that name.
std::optional<Strategy> parse_strategy(const std::string& name);
// "aten" or, with more strategies, "aten, phase, ...": for error messages.
std::string known_strategy_names();
std::vector<Strategy> all_strategies();

struct GradientPlan {
  Strategy strategy = Strategy::aten;
  std::string reason;
};

struct Plan {
  ConvGeometry geometry;
  GradientPlan input;
  GradientPlan weight;

  const GradientPlan& of(Gradient gradient) const {
    return gradient == Gradient::input ? input : weight;
  }
};

// Plans both gradients of a valid geometry (see find_geometry_error). A forced
// strategy is used for every gradient it can serve; make_plan throws
// std::invalid_argument naming the reason when it can serve neither.
Plan make_plan(const ConvGeometry& geometry, std::optional<Strategy> forced = std::nullopt);

}  // namespace bwdconv
