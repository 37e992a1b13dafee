// Arithmetic element types of the kernels that compute (splitk), and their
// conversions to and from the accumulator, as bit manipulation that the CPU
// unit tests can check: no vendor half/bfloat16 headers needed.
#pragma once

#include <cstdint>
#include <cstring>

#include "portability.h"

namespace bwdconv::hip {

enum class ElementType : int { Float32, Float64, Float16, BFloat16 };

struct Half {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};

BWDCONV_HOST_DEVICE inline uint32_t float_bits(float value) {
  uint32_t bits;
  memcpy(&bits, &value, sizeof bits);
  return bits;
}

BWDCONV_HOST_DEVICE inline float bits_float(uint32_t bits) {
  float value;
  memcpy(&value, &bits, sizeof value);
  return value;
}

// IEEE binary16 -> binary32, exact.
BWDCONV_HOST_DEVICE inline float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
  if (exponent == 0x1f) return bits_float(sign | 0x7f800000u | (mantissa << 13));  // inf, NaN
  if (exponent != 0) return bits_float(sign | ((exponent + 112) << 23) | (mantissa << 13));
  // Zero or subnormal: mantissa * 2^-24, exact in binary32.
  const float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
  return sign ? -magnitude : magnitude;
}

// binary32 -> binary16, rounding to nearest, ties to even.
BWDCONV_HOST_DEVICE inline uint16_t float_to_half(float value) {
  const uint32_t bits = float_bits(value);
  const uint32_t sign = (bits >> 16) & 0x8000u, magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);  // NaN
  if (magnitude >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520: inf
  if (magnitude >= 0x38800000u) {  // normal in binary16 (>= 2^-14): round at bit 13, rebias
    const uint32_t rounded = magnitude + 0xfffu + ((magnitude >> 13) & 1u);
    return static_cast<uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
  }
  // Subnormal in binary16: round the significand * 2^(exponent - 126) to an integer.
  const uint32_t exponent = magnitude >> 23;
  const uint32_t shift = 126 - exponent;  // >= 14 here
  if (shift > 24) return static_cast<uint16_t>(sign);  // below half the smallest subnormal
  const uint32_t significand = (magnitude & 0x7fffffu) | 0x800000u;
  uint32_t quotient = significand >> shift;
  const uint32_t rest = significand & ((1u << shift) - 1), half_way = 1u << (shift - 1);
  if (rest > half_way || (rest == half_way && (quotient & 1u))) ++quotient;
  return static_cast<uint16_t>(sign | quotient);
}

BWDCONV_HOST_DEVICE inline float bfloat16_to_float(uint16_t b) {
  return bits_float(static_cast<uint32_t>(b) << 16);
}

// binary32 -> bfloat16, rounding to nearest, ties to even.
BWDCONV_HOST_DEVICE inline uint16_t float_to_bfloat16(float value) {
  const uint32_t bits = float_bits(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  return static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

// Stores from the accumulator type.
template <typename T>
struct FromAccumulator {
  template <typename Acc>
  BWDCONV_HOST_DEVICE static T convert(Acc v) { return static_cast<T>(v); }
};
template <>
struct FromAccumulator<Half> {
  BWDCONV_HOST_DEVICE static Half convert(float v) { return Half{float_to_half(v)}; }
};
template <>
struct FromAccumulator<BFloat16> {
  BWDCONV_HOST_DEVICE static BFloat16 convert(float v) { return BFloat16{float_to_bfloat16(v)}; }
};

}  // namespace bwdconv::hip
