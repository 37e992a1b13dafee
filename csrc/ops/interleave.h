// interleave: writes dx from the phases' sub-convolution results, in one pass
// per up to 32 phases of the kernel (csrc/hip/interleave.cu) on GPUs and on
// the host grid when switched on (kernels.h), with strided ATen copies per
// phase on the CPU otherwise:
// phase r's result row q lands at dx[s*q + r - p]; rows past the result, and
// phases without one, are zeros. phase, phase_stacked and swap1x1 share it.
#pragma once

#include <ATen/ATen.h>

#include <vector>

#include "dispatch/plan.h"
#include "hip/params.h"

namespace bwdconv::ops {

// What one phase (residues row-major, last dim fastest) contributes to dx.
struct PhaseInput {
  hip::PhaseWrite write = hip::PhaseWrite::Zero;
  at::Tensor result;            // [N, C', q...] when write == Copy
  int64_t channel_offset = 0;   // the phase's first channel in `result`
};

// Channel c of dx reads channel (c / per_group) * group_step + c % per_group
// (+ the phase's channel offset) of its result; per_group = C reads channel c.
struct ChannelMap {
  int64_t per_group = 1;
  int64_t group_step = 0;
};

// An uninitialised dx of the plan's input sizes in `format`, like grad_output
// otherwise: what interleave then writes in full.
at::Tensor empty_input_gradient(const Plan& plan, const at::Tensor& grad_output,
                                at::MemoryFormat format);

// Writes every slot of every phase into dx: `phases` has one entry per phase
// of plan.phases, whose slots (PhaseDim) say where each result row lands.
void interleave(at::Tensor& dx, const Plan& plan, const std::vector<PhaseInput>& phases,
                ChannelMap channels);

}  // namespace bwdconv::ops
