// Torch-free launch parameters: raw pointers, int64 sizes and element strides.
#pragma once

#include <cstdint>

namespace bwdconv::hip {

// Batch, channel and up to three spatial dims.
constexpr int kMaxTensorDims = 5;

// A strided view of a tensor: sizes and element strides in logical
// (N, C, spatial...) order.
struct TensorView {
  int64_t sizes[kMaxTensorDims] = {};
  int64_t strides[kMaxTensorDims] = {};
  int dims = 0;
};

// scatter (DESIGN.md, "Geometry"): the zero-inserted, padded grad_output.
// dst[n, c, j...] = src[n, c, (j - lead)/stride...] where every (j - lead) is a
// non-negative multiple of its stride below src's size, and 0 elsewhere.
// Elements are copied as raw bits of `element_bytes` (2, 4 or 8).
struct ScatterParams {
  const void* src = nullptr;
  void* dst = nullptr;
  TensorView src_view;
  TensorView dst_view;
  int64_t stride[3] = {1, 1, 1};
  int64_t lead[3] = {};
  int element_bytes = 4;
};

}  // namespace bwdconv::hip
