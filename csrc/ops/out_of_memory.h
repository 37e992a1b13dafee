// A strategy that runs out of memory leaves its gradient to aten, for that
// call and, for its shape, for the rest of the process (docs/DESIGN.md,
// "Out of memory").
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "dispatch/plan.h"

namespace bwdconv::ops {

// `run()`, the gradient `strategy` computes for `plan`; when it raises
// c10::OutOfMemoryError (a GPU's caching allocator or the CPU allocator),
// what it allocated is released as the error unwinds, one warning names the
// strategy and the shape, the shape's plans avoid the strategy from then on,
// and `aten()` computes the gradient. aten's own out-of-memory error, and
// every other error, reaches the caller unchanged.
at::Tensor aten_if_out_of_memory(Gradient gradient, const Plan& plan,
                                 const std::function<at::Tensor()>& run,
                                 const std::function<at::Tensor()>& aten);

// `plan`, or a copy whose gradients planned for a strategy that ran out of
// memory on this shape are aten's.
std::shared_ptr<const Plan> avoiding_out_of_memory(std::shared_ptr<const Plan> plan);

// Fault injection for the tests: every computation by one of `strategies`
// raises c10::OutOfMemoryError before it starts (aten's: where it stands in
// for a strategy that ran out of memory).
void set_out_of_memory_strategies(const std::vector<Strategy>& strategies);

// Forgets which shapes ran out of memory (the tests start afresh).
void forget_out_of_memory();

}  // namespace bwdconv::ops
