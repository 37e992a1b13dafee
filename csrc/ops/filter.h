// Filter rearrangements shared by the input-gradient strategies: each of
// them runs a stride-1 convolution of grad_output with (a slice of) the
// flipped filter whose in/out channels are swapped within each group.
#pragma once

#include <ATen/ATen.h>

#include <string>

#include "dispatch/phase.h"

namespace bwdconv::ops {

// w [O, C/g, K...] -> [C, O/g, K...] with the spatial dims reversed: the
// filter of the convolution that maps grad_output to the input gradient.
at::Tensor adjoint_filter(const at::Tensor& weight, int64_t groups);

// adjoint_filter of the phase's taps only: T_r, consecutive taps s/g apart
// (docs/DESIGN.md, "Geometry").
at::Tensor phase_adjoint_filter(const at::Tensor& weight, const Phase& phase, int64_t groups);

// The phase's taps per dim (first:count:step), for the keys of the filters
// reused inside bwdconv.reuse_weight_transforms() (ops/weight_cache.h).
std::string phase_taps_text(const Phase& phase);

// Both reuse their result inside bwdconv.reuse_weight_transforms()
// (ops/weight_cache.h); this one always builds it, for a filter that is
// itself cached whole (phase_stacked's).
at::Tensor built_phase_adjoint_filter(const at::Tensor& weight, const Phase& phase,
                                      int64_t groups);

}  // namespace bwdconv::ops
