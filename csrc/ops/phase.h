// phase: one stride-1 sub-convolution per non-empty phase, each written into
// its strided slots of dx; empty phases are only zero-filled.
#pragma once

#include <ATen/ATen.h>

#include "dispatch/plan.h"
#include "ops/geometry.h"

namespace bwdconv::ops {

at::Tensor phase_grad_input(const Plan& plan, const at::Tensor& grad_output,
                            const at::Tensor& weight, at::IntArrayRef input_sizes,
                            const ConvParams& params, at::MemoryFormat format);

// Writes one phase of dx: its sub-convolution output `computed` (indexed by q,
// undefined for an empty phase) into the phase's slots, zeros in the slots it
// does not reach. Every slot of the phase is written.
void write_phase(at::Tensor& dx, const Phase& phase, const at::Tensor& computed);

}  // namespace bwdconv::ops
