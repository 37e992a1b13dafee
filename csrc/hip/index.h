// Narrow division shared by the kernels' index math (row_index.h) and the
// host code that prepares it (layout.cpp).
#pragma once

#include <cstdint>

#include "params.h"
#include "portability.h"

namespace bwdconv::hip {

// Dividends and divisors below this bound may use narrow division
// (params.h, Divisor).
constexpr int64_t kNarrowLimit = int64_t{1} << 31;

BWDCONV_HOST_DEVICE inline uint32_t multiply_high(uint32_t a, uint32_t b) {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  return __umulhi(a, b);
#else
  return static_cast<uint32_t>((static_cast<uint64_t>(a) * b) >> 32);
#endif
}

}  // namespace bwdconv::hip
