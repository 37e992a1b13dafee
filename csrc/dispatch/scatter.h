// scatter: the input gradient as a stride-1 convolution over the zero-inserted,
// padded grad_output (docs/DESIGN.md, "scatter").
#pragma once

#include <cstdint>

#include "geometry.h"

namespace bwdconv {

// One spatial dim of the zero-inserted, padded buffer: dy[o] lands at
// lead + o*s; the buffer has `lead` positions before dy's first value and
// `trail` after its last (a negative lead or trail crops).
struct ScatterDim {
  int64_t lead = 0;            // L = d(K-1) - p
  int64_t output_padding = 0;  // op = I - ((O-1)s - 2p + d(K-1) + 1)
  int64_t trail = 0;           // L + op
  int64_t buffer = 0;          // (O-1)s + 1 + L + trail
};

struct ScatterGeometry {
  std::array<ScatterDim, kMaxSpatialDims> dims{};
  int spatial_dims = 0;
};

ScatterGeometry make_scatter_geometry(const ConvGeometry& geometry);

}  // namespace bwdconv
