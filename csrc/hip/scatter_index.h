// Index math of the scatter kernel, shared with its CPU twin and unit tests.
#pragma once

#include <cstdint>

#include "index.h"

namespace bwdconv::hip {

// Position in grad_output that feeds position j of the zero-inserted, padded
// buffer along one dim, or -1 where the buffer holds a zero:
// j = lead + o*stride with 0 <= o < size (DESIGN.md, "scatter"). Index as in divide.
template <typename Index = int64_t>
BWDCONV_HOST_DEVICE inline int64_t scatter_source(int64_t j, int64_t lead, const Step& stride,
                                                  int64_t size) {
  const int64_t shifted = j - lead;
  if (shifted < 0) return -1;
  int64_t o, rest;
  divide<Index>(shifted, stride, &o, &rest);
  return (rest == 0 && o < size) ? o : -1;
}

// Element offset in src that feeds the dst element at `coords`, or -1 for a zero.
template <typename Index = int64_t>
BWDCONV_HOST_DEVICE inline int64_t scatter_source_offset(const ScatterParams& p,
                                                         const int64_t* coords) {
  int64_t offset = coords[0] * p.src_view.strides[0] + coords[1] * p.src_view.strides[1];
  for (int d = 2; d < p.dst_view.dims; ++d) {
    const int64_t o = scatter_source<Index>(coords[d], p.lead[d - 2], p.stride[d - 2],
                                            p.src_view.sizes[d]);
    if (o < 0) return -1;
    offset += o * p.src_view.strides[d];
  }
  return offset;
}

}  // namespace bwdconv::hip

namespace bwdconv::hip {

// Whether the scatter walk may divide narrow (host only): j - lead is its
// largest spatial dividend.
inline bool scatter_divides_narrow(const ScatterParams& p) {
  int64_t shift[kMaxSpatialDims] = {};
  for (int i = 0; i < kMaxSpatialDims; ++i) shift[i] = -p.lead[i];
  return walk_divides_narrow(p.dst_view, p.stride, shift);
}

}  // namespace bwdconv::hip
