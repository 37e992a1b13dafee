// Index math of the splitk kernels, shared with their unit tests.
#pragma once

#include <cstdint>

#include "index.h"

namespace bwdconv::hip {

// First reduction index of chunk j of `chunks` near-equal ranges (j = chunks: the end).
BWDCONV_HOST_DEVICE inline int64_t chunk_begin(int64_t reduction, int64_t chunks, int64_t j) {
  return reduction * j / chunks;
}

// r = n * prod(O) + o, o row-major over the output dims: writes o, returns n.
BWDCONV_HOST_DEVICE inline int64_t reduction_position(const SplitKParams& p, int64_t r,
                                                      int64_t* o) {
  for (int d = p.spatial_dims - 1; d >= 0; --d) {
    const int64_t size = p.grad_output_view.sizes[d + 2];
    o[d] = r % size;
    r /= size;
  }
  return r;
}

// col = c * prod(K) + k, k row-major over the filter dims: writes k, returns c.
BWDCONV_HOST_DEVICE inline int64_t column_tap(const SplitKParams& p, int64_t col, int64_t* k) {
  for (int d = p.spatial_dims - 1; d >= 0; --d) {
    k[d] = col % p.filter[d];
    col /= p.filter[d];
  }
  return col;
}

BWDCONV_HOST_DEVICE inline int64_t grad_output_offset(const SplitKParams& p, int64_t n,
                                                      int64_t channel, const int64_t* o) {
  const TensorView& v = p.grad_output_view;
  int64_t offset = n * v.strides[0] + channel * v.strides[1];
  for (int d = 0; d < p.spatial_dims; ++d) offset += o[d] * v.strides[d + 2];
  return offset;
}

// Offset of x[n, channel, o*s + k*d - p], or -1 where that falls in the padding.
BWDCONV_HOST_DEVICE inline int64_t input_offset(const SplitKParams& p, int64_t n,
                                                int64_t channel, const int64_t* o,
                                                const int64_t* k) {
  const TensorView& v = p.input_view;
  int64_t offset = n * v.strides[0] + channel * v.strides[1];
  for (int d = 0; d < p.spatial_dims; ++d) {
    const int64_t i = o[d] * p.stride[d] + k[d] * p.dilation[d] - p.padding[d];
    if (i < 0 || i >= v.sizes[d + 2]) return -1;
    offset += i * v.strides[d + 2];
  }
  return offset;
}

}  // namespace bwdconv::hip
