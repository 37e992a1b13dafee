// Views of dense tensors for the kernel and walk tests: the strides a
// contiguous or channels_last tensor has, and element offsets in them.
#pragma once

#include <cstdint>
#include <vector>

#include "hip/params.h"

namespace bwdconv::hip::test_views {

// Strides of `sizes` ([N, C, spatial...]), channels innermost when
// `channels_last`: dense, or with `gap` unused elements after each run of the
// fastest dim.
inline std::vector<int64_t> dense_strides(const std::vector<int64_t>& sizes, bool channels_last,
                                          int64_t gap = 0) {
  std::vector<int> order;  // fastest first
  if (channels_last) order.push_back(1);
  for (int d = static_cast<int>(sizes.size()) - 1; d >= 0; --d) {
    if (!(channels_last && d == 1)) order.push_back(d);
  }
  std::vector<int64_t> strides(sizes.size());
  int64_t stride = 1;
  for (const int d : order) {
    strides[d] = stride;
    stride *= sizes[d] + (d == order.front() ? gap : 0);
  }
  return strides;
}

// The view of `sizes` with dense_strides.
inline TensorView view_of(const std::vector<int64_t>& sizes, bool channels_last,
                          int64_t gap = 0) {
  TensorView view;
  view.dims = static_cast<int>(sizes.size());
  const std::vector<int64_t> strides = dense_strides(sizes, channels_last, gap);
  for (int d = 0; d < view.dims; ++d) {
    view.sizes[d] = sizes[d];
    view.strides[d] = strides[d];
  }
  return view;
}

// Element offset of the coordinates `coords` (all dims) in `view`.
inline int64_t offset_of(const TensorView& view, const std::vector<int64_t>& coords) {
  int64_t offset = 0;
  for (int d = 0; d < view.dims; ++d) offset += coords[d] * view.strides[d];
  return offset;
}

}  // namespace bwdconv::hip::test_views
