// Filters derived from a weight (flipped, stacked, reordered), reused while
// the weight is unchanged, inside bwdconv.reuse_weight_transforms()
// (docs/DESIGN.md, "Weight transforms").
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <string>

namespace bwdconv::ops {

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
