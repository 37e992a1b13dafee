// The planner: which strategy computes each gradient of a convolution, why,
// and why every other strategy was refused or ranked lower. The plan also
// carries the geometry each strategy needs, so that the CPU implementations
// and the GPU kernels read it from one place.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "geometry.h"
#include "phase.h"
#include "phase_stacked.h"
#include "scatter.h"
#include "splitk.h"
#include "strategies.h"
#include "swap1x1.h"

namespace bwdconv {

struct Candidate {
  Strategy strategy = Strategy::aten;
  bool serves = false;
  std::string refusal;  // when it does not serve: why
};

struct GradientPlan {
  Strategy strategy = Strategy::aten;
  std::string reason;
  std::vector<Candidate> candidates;  // every strategy, chosen one included
  bool measured = false;              // chosen by a measurement on this device, not a rule
};

// Why `candidate` was refused, chosen, or ranked below the plan's strategy
// (by a rule or a measurement). Written when asked (explain), not when
// planning: the planner plans every new shape a call brings.
std::string candidate_reason(const GradientPlan& plan, const Candidate& candidate);

struct Plan {
  ConvGeometry geometry;
  GradientPlan input;
  GradientPlan weight;
  std::vector<Phase> phases;  // every phase, empty ones included
  ScatterGeometry scatter;
  StackedGeometry stacked;    // filled when phase_stacked can serve
  SplitKGeometry splitk;
  std::optional<Swap1x1Choice> swap1x1;  // how swap1x1 writes dx, when swap1x1 can serve

  const GradientPlan& of(Gradient gradient) const {
    return gradient == Gradient::input ? input : weight;
  }
};

// Plans both gradients of a geometry; throws std::invalid_argument for an
// invalid geometry (see find_geometry_error). A forced strategy is used for
// every gradient it can serve; a gradient it cannot serve is planned freely,
// and its reason says so. A forced swap1x1 writer applies when swap1x1
// computes the input gradient and the writer can serve; otherwise the
// planner's writer is used and its reason says so. `strict` makes forcing
// binding: make_plan throws std::invalid_argument, with the reasons, when the
// forced strategy can serve neither gradient or the forced writer cannot serve.
Plan make_plan(const ConvGeometry& geometry, std::optional<Strategy> forced = std::nullopt,
               std::optional<Swap1x1Writer> forced_writer = std::nullopt, bool strict = false);

}  // namespace bwdconv
