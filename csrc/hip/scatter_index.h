// Index math of the scatter kernel, shared with its CPU unit tests.
#pragma once

#include <cstdint>

#include "params.h"
#include "portability.h"

namespace bwdconv::hip {

// Position in grad_output that feeds position j of the zero-inserted, padded
// buffer along one dim, or -1 where the buffer holds a zero:
// j = lead + o*stride with 0 <= o < size (DESIGN.md, "scatter").
BWDCONV_HOST_DEVICE inline int64_t scatter_source(int64_t j, int64_t lead, int64_t stride,
                                                  int64_t size) {
  const int64_t shifted = j - lead;
  if (shifted < 0) return -1;
  int64_t o;
  int64_t rest;
  if ((stride & (stride - 1)) == 0) {  // power of two: shift and mask
    int shift = 0;
    while ((int64_t{1} << shift) < stride) ++shift;
    o = shifted >> shift;
    rest = shifted & (stride - 1);
  } else {
    o = shifted / stride;
    rest = shifted - o * stride;
  }
  return (rest == 0 && o < size) ? o : -1;
}

// Splits a linear index over `view.sizes` (last dim fastest) into an element
// offset using `view.strides`; writes the per-dim coordinates to `coords`.
BWDCONV_HOST_DEVICE inline int64_t unravel_offset(int64_t linear, const TensorView& view,
                                                  int64_t* coords) {
  int64_t offset = 0;
  for (int d = view.dims - 1; d >= 0; --d) {
    coords[d] = linear % view.sizes[d];
    linear /= view.sizes[d];
    offset += coords[d] * view.strides[d];
  }
  return offset;
}

// Element offset in src that feeds the dst element at `coords`, or -1 for a zero.
BWDCONV_HOST_DEVICE inline int64_t scatter_source_offset(const ScatterParams& p,
                                                         const int64_t* coords) {
  int64_t offset = coords[0] * p.src_view.strides[0] + coords[1] * p.src_view.strides[1];
  for (int d = 2; d < p.dst_view.dims; ++d) {
    const int64_t o = scatter_source(coords[d], p.lead[d - 2], p.stride[d - 2],
                                     p.src_view.sizes[d]);
    if (o < 0) return -1;
    offset += o * p.src_view.strides[d];
  }
  return offset;
}

}  // namespace bwdconv::hip
