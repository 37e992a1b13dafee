// bwdconv._C's functions for the autotuner (python/bwdconv/_tune.py): the
// tuning hook, explicit-strategy gradients, and the test-only corruption.
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

}  // namespace bwdconv::ops
