// Index math shared by every kernel and by their unit tests.
#pragma once

#include <cstdint>

#include "params.h"
#include "portability.h"

namespace bwdconv::hip {

// Dividends below this bound may use narrow division.
constexpr int64_t kNarrowLimit = int64_t{1} << 31;

BWDCONV_HOST_DEVICE inline uint32_t multiply_high(uint32_t a, uint32_t b) {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  return __umulhi(a, b);
#else
  return static_cast<uint32_t>((static_cast<uint64_t>(a) * b) >> 32);
#endif
}

// value / step.value for value < 2^31 and step.value < 2^31, without a
// divide instruction: with l = ceil(log2(step)) and
// magic = floor(2^32 * (2^l - step) / step) + 1,
// value / step = (mulhi(value, magic) + value) >> l (Granlund and Montgomery,
// "Division by invariant integers using multiplication", PLDI 1994; the sum
// stays below 2^32 because value < 2^31).
BWDCONV_HOST_DEVICE inline uint32_t narrow_quotient(uint32_t value, const Step& step) {
  return (multiply_high(value, step.magic) + value) >> step.magic_shift;
}

// value = quotient * step + remainder for value >= 0: a shift and a mask when
// the step is a power of two; otherwise narrow division when Index is 32 bits
// wide (the caller guarantees value < kNarrowLimit), else 64-bit division.
template <typename Index = int64_t>
BWDCONV_HOST_DEVICE inline void divide(int64_t value, const Step& step, int64_t* quotient,
                                       int64_t* remainder) {
  static_assert(sizeof(Index) == 4 || sizeof(Index) == 8, "32- or 64-bit index math");
  if (step.shift >= 0) {
    *quotient = value >> step.shift;
    *remainder = value & (step.value - 1);
    return;
  }
  if constexpr (sizeof(Index) == 4) {
    *quotient = narrow_quotient(static_cast<uint32_t>(value), step);
  } else {
    *quotient = value / step.value;
  }
  *remainder = value - *quotient * step.value;
}

// Splits a linear index in walk order (view.order, last entry fastest) into
// logical coordinates `coords`; returns their element offset. Index as in divide.
template <typename Index = int64_t>
BWDCONV_HOST_DEVICE inline int64_t unravel_offset(int64_t linear, const TensorView& view,
                                                  int64_t* coords) {
  int64_t offset = 0;
  for (int k = view.dims - 1; k >= 0; --k) {
    const int d = view.order[k];
    divide<Index>(linear, view.size_steps[d], &linear, &coords[d]);
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

// Whether every division of a walk over `view` may be narrow (host only): the
// linear index, each spatial coordinate plus shift[i] (its largest dividend)
// and each spatial divisor step[i] stay below kNarrowLimit.
inline bool walk_divides_narrow(const TensorView& view, const Step* step, const int64_t* shift) {
  bool narrow = element_count(view) < kNarrowLimit;
  for (int i = 0; i + 2 < view.dims; ++i) {
    narrow = narrow && view.sizes[i + 2] + shift[i] < kNarrowLimit &&
             step[i].value < kNarrowLimit;
  }
  return narrow;
}

}  // namespace bwdconv::hip
