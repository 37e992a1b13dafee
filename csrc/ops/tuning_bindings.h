// bwdconv._C's functions for the autotuner (python/bwdconv/_tune.py): the
// tuning hook, explicit-strategy gradients, and the test-only corruption.
#pragma once

#include <torch/extension.h>

namespace bwdconv::ops {

void register_tuning_bindings(pybind11::module& m);

}  // namespace bwdconv::ops
