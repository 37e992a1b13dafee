// The implementations of the registry's strategies (dispatch/strategies.h),
// one function per gradient a strategy computes, all with one signature.
#pragma once

#include <ATen/ATen.h>

#include "dispatch/plan.h"

namespace bwdconv::ops {

// A gradient computed by a strategy: `operand` is the weight for the input
// gradient and the input for the weight gradient; `format` is the layout
// PyTorch's meta function gives that gradient. Every size and convolution
// argument comes from plan.geometry, every strategy geometry from the plan.
using GradientFn = at::Tensor (*)(const Plan& plan, const at::Tensor& grad_output,
                                  const at::Tensor& operand, at::MemoryFormat format);

// The function computing `gradient` with `strategy`; the registry says it computes it.
GradientFn implementation(Strategy strategy, Gradient gradient);

// Makes `fn` the function computing `gradient` with `strategy` (nullptr stays
// nullptr: the registry says what a strategy computes) and returns the one it
// replaces: how the tests' fault injection (csrc/ops/testing.cpp) stands in
// for a strategy, at no cost to a call.
GradientFn replace_implementation(Strategy strategy, Gradient gradient, GradientFn fn);

}  // namespace bwdconv::ops
