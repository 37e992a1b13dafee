// bwdconv._C's functions for the autotuner (python/bwdconv/_tune.py): the
// tuning hook and explicit-strategy gradients; and bwdconv._C._testing, the
// tests' fault injection (testing.cpp).
#pragma once

#include <pybind11/pybind11.h>

#include <string>

#include "dispatch/plan.h"

namespace bwdconv::ops {

// The strategy and the swap1x1 writer called `name`; a Python ValueError
// listing the known names otherwise (module.cpp).
Strategy strategy_named(const std::string& name);
Swap1x1Writer swap1x1_writer_named(const std::string& name);

void register_tuning_bindings(pybind11::module& m);
void register_testing_bindings(pybind11::module& m);

}  // namespace bwdconv::ops
