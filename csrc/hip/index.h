// Index math shared by every kernel and by their CPU twins and unit tests.
#pragma once

#include <cstdint>

#include "params.h"
#include "portability.h"

namespace bwdconv::hip {

// value = quotient * step + remainder for value >= 0; a shift and a mask
// when the step is a power of two.
BWDCONV_HOST_DEVICE inline void divide(int64_t value, Step step, int64_t* quotient,
                                       int64_t* remainder) {
  if (step.shift >= 0) {
    *quotient = value >> step.shift;
    *remainder = value & (step.value - 1);
  } else {
    *quotient = value / step.value;
    *remainder = value - *quotient * step.value;
  }
}

// Splits a linear index in walk order (view.order, last entry fastest) into
// logical coordinates `coords`; returns their element offset.
BWDCONV_HOST_DEVICE inline int64_t unravel_offset(int64_t linear, const TensorView& view,
                                                  int64_t* coords) {
  int64_t offset = 0;
  for (int k = view.dims - 1; k >= 0; --k) {
    const int d = view.order[k];
    coords[d] = linear % view.sizes[d];
    linear /= view.sizes[d];
    offset += coords[d] * view.strides[d];
  }
  return offset;
}

// Moves `coords` to the next element in walk order (an odometer); returns the
// element offset of the new position. The caller stops after the last element.
BWDCONV_HOST_DEVICE inline int64_t advance_coords(const TensorView& view, int64_t* coords,
                                                  int64_t offset) {
  for (int k = view.dims - 1; k >= 0; --k) {
    const int d = view.order[k];
    if (++coords[d] < view.sizes[d]) return offset + view.strides[d];
    offset -= (coords[d] - 1) * view.strides[d];
    coords[d] = 0;
  }
  return offset;
}

BWDCONV_HOST_DEVICE inline int64_t element_count(const TensorView& view) {
  int64_t count = 1;
  for (int d = 0; d < view.dims; ++d) count *= view.sizes[d];
  return count;
}

}  // namespace bwdconv::hip
