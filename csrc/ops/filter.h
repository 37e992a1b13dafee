// Filter rearrangements shared by the input-gradient strategies: each of
// them runs a stride-1 convolution of grad_output with (a slice of) the
// flipped filter whose in/out channels are swapped within each group. And
// the reuse of filters derived from a weight (flipped, stacked, reordered)
// while the weight is unchanged, inside bwdconv.reuse_weight_transforms()
// (docs/DESIGN.md, "Weight transforms").
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
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
// reused inside bwdconv.reuse_weight_transforms() (cached_filter).
std::string phase_taps_text(const Phase& phase);

// Both reuse their result inside bwdconv.reuse_weight_transforms()
// (cached_filter); this one always builds it, for a filter that is
// itself cached whole (phase_stacked's).
at::Tensor built_phase_adjoint_filter(const at::Tensor& weight, const Phase& phase,
                                      int64_t groups);

// build(), or the filter an earlier build() returned for the same weight
// (storage, offset, sizes, strides, dtype and version) and transform() (what
// build computes, with every parameter it reads besides the weight; called
// only inside the scope). Builds
// every time outside the scope, for inference tensors (no version to check),
// and while a GPU stream is capturing a graph (a replay would read the cached
// filter after the cache let it go); never keeps a view of the weight.
at::Tensor cached_filter(const at::Tensor& weight, const std::function<std::string()>& transform,
                         const std::function<at::Tensor()>& build);

// The scope: entries nest, and the last exit empties the cache.
void enter_weight_cache();
void exit_weight_cache();

struct WeightCacheCounts {
  int64_t hits = 0, builds = 0, entries = 0;
};
WeightCacheCounts weight_cache_counts();

}  // namespace bwdconv::ops
