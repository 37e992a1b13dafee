// bwdconv._C._testing: fault injection for the tests. It stands in for a
// strategy's functions (backward.h: replace_implementation), so that a
// user's call runs the strategies' own functions and pays nothing for it.
//   set_faults(corrupted, out_of_memory): from now on the gradients
//     `corrupted` computes are off by one (to prove that the tuner and the
//     random checks catch a wrong strategy), and every computation by one of
//     `out_of_memory` raises c10::OutOfMemoryError before it starts (aten's:
//     where it stands in for a strategy that ran out of memory);
//     set_faults(None, []) puts the strategies back.
//   set_wide_offsets(on): the kernels use their 64-bit element offsets on
//     any shape, so that the tests prove that path on small tensors.
#include "ops/precompiled.h"  // first, as the precompiled header must be

#include <torch/csrc/utils/pybind.h>
#include <pybind11/stl.h>

#include <array>
#include <atomic>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ops/kernels.h"
#include "ops/plans.h"
#include "ops/backward.h"
#include "ops/tuning_bindings.h"

namespace bwdconv::ops {
namespace {

struct Faults {
  std::optional<Strategy> corrupted;
  std::vector<Strategy> out_of_memory;
  // The strategies' own functions, while stand-ins replace them.
  std::array<std::array<GradientFn, 2>, kStrategyCount> originals{};
  bool installed = false;
};

Faults& faults() {
  static Faults instance;
  return instance;
}

bool runs_out(Strategy strategy) {
  for (Strategy s : faults().out_of_memory) {
    if (s == strategy) return true;
  }
  return false;
}

// The stand-in for strategy S's gradient G (0: input, 1: weight).
template <size_t S, size_t G>
at::Tensor stand_in(const Plan& plan, const at::Tensor& grad_output, const at::Tensor& operand,
                    at::MemoryFormat format) {
  const Strategy strategy = static_cast<Strategy>(S);
  TORCH_CHECK_WITH(OutOfMemoryError, !runs_out(strategy), "bwdconv: out of memory injected for ",
                   strategy_name(strategy), " (fault injection)");
  at::Tensor gradient = faults().originals[S][G](plan, grad_output, operand, format);
  return faults().corrupted == strategy ? gradient.add(1) : gradient;
}

template <size_t... S>
constexpr std::array<std::array<GradientFn, 2>, sizeof...(S)> make_stand_ins(
    std::index_sequence<S...>) {
  return {{{&stand_in<S, 0>, &stand_in<S, 1>}...}};
}

constexpr auto kStandIns = make_stand_ins(std::make_index_sequence<kStrategyCount>());

constexpr Gradient kGradients[] = {Gradient::input, Gradient::weight};

// Puts the stand-ins in (install) or the originals back, where a strategy
// computes the gradient.
void swap_functions(bool install) {
  Faults& f = faults();
  if (f.installed == install) return;
  for (size_t s = 0; s < kStrategyCount; ++s) {
    for (size_t g = 0; g < 2; ++g) {
      const Strategy strategy = static_cast<Strategy>(s);
      if (implementation(strategy, kGradients[g]) == nullptr && !f.originals[s][g]) continue;
      const GradientFn replaced = replace_implementation(
          strategy, kGradients[g], install ? kStandIns[s][g] : f.originals[s][g]);
      if (install) f.originals[s][g] = replaced;
    }
  }
  f.installed = install;
}

void set_faults(const std::optional<std::string>& corrupted,
                const std::vector<std::string>& out_of_memory) {
  std::optional<Strategy> corrupt;
  if (corrupted) corrupt = strategy_named(*corrupted);
  std::vector<Strategy> exhausted;
  for (const std::string& name : out_of_memory) exhausted.push_back(strategy_named(name));
  Faults& f = faults();
  f.corrupted = corrupt;
  f.out_of_memory = std::move(exhausted);
  swap_functions(corrupt.has_value() || !f.out_of_memory.empty());
}

std::atomic<bool> wide_offsets{false};

}  // namespace

bool wide_offsets_for_tests() { return wide_offsets.load(std::memory_order_relaxed); }

void register_testing_bindings(pybind11::module& m) {
  pybind11::module testing = m.def_submodule("_testing", "fault injection for the tests");
  testing.def("set_faults", &set_faults, pybind11::arg("corrupted") = std::nullopt,
              pybind11::arg("out_of_memory") = std::vector<std::string>{});
  testing.def("forget_out_of_memory", &forget_out_of_memory);
  testing.def("set_wide_offsets", [](bool on) { wide_offsets = on; }, pybind11::arg("on"));
}

}  // namespace bwdconv::ops
