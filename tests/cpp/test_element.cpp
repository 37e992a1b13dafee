// binary16 and bfloat16 conversions against exact double arithmetic: every
// pattern decodes to its value and round-trips, and float -> 16 bits rounds
// to nearest, ties to even, with overflow to infinity and signed underflow.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "hip/element.h"

namespace bwdconv::hip {
namespace {

// A 16-bit IEEE-style format: sign, exponent_bits, mantissa_bits.
struct Format {
  const char* name;
  int exponent_bits;
  int mantissa_bits;
  float (*to_float)(uint16_t);
  uint16_t (*from_float)(float);

  int bias() const { return (1 << (exponent_bits - 1)) - 1; }
  uint32_t infinity() const { return ((1u << exponent_bits) - 1) << mantissa_bits; }
  uint32_t mantissa_mask() const { return (1u << mantissa_bits) - 1; }
  bool is_nan(uint32_t bits) const {
    return (bits & infinity()) == infinity() && (bits & mantissa_mask()) != 0;
  }
};

const Format kHalf{"binary16", 5, 10, half_to_float, float_to_half};
const Format kBFloat16{"bfloat16", 8, 7, bfloat16_to_float, float_to_bfloat16};

constexpr uint32_t kSign = 0x8000;

// Exact magnitude of a sign-less pattern up to infinity(); the infinity
// pattern maps to the power of two one step past the largest finite value,
// which is where rounding overflows.
double grid_value(const Format& f, uint32_t bits) {
  const int exponent = static_cast<int>(bits >> f.mantissa_bits);
  const double mantissa = bits & f.mantissa_mask();
  if (exponent == 0) return std::ldexp(mantissa, 1 - f.bias() - f.mantissa_bits);
  return std::ldexp(std::ldexp(1.0, f.mantissa_bits) + mantissa,
                    exponent - f.bias() - f.mantissa_bits);
}

// Exact value of a non-NaN pattern.
double exact_value(const Format& f, uint32_t bits) {
  const uint32_t magnitude = bits & ~kSign;
  const double value = magnitude == f.infinity() ? std::numeric_limits<double>::infinity()
                                                 : grid_value(f, magnitude);
  return bits & kSign ? -value : value;
}

// Round to nearest, ties to even, from the grid of exact values.
uint16_t round_exactly(const Format& f, double x) {
  const uint32_t sign = std::signbit(x) ? kSign : 0;
  const double magnitude = std::fabs(x);
  uint32_t low = 0, high = f.infinity();  // largest pattern whose grid value is <= magnitude
  while (low < high) {
    const uint32_t middle = (low + high + 1) / 2;
    if (grid_value(f, middle) <= magnitude) low = middle; else high = middle - 1;
  }
  if (low == f.infinity()) return static_cast<uint16_t>(sign | low);
  const double midpoint = (grid_value(f, low) + grid_value(f, low + 1)) / 2;
  uint32_t rounded = low;
  if (magnitude > midpoint || (magnitude == midpoint && low % 2 == 1)) rounded = low + 1;
  return static_cast<uint16_t>(sign | rounded);
}

float with_sign(uint32_t sign, float magnitude) { return sign ? -magnitude : magnitude; }

void expect_every_pattern_decodes_exactly(const Format& f) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const float value = f.to_float(static_cast<uint16_t>(bits));
    if (f.is_nan(bits)) {
      ASSERT_TRUE(std::isnan(value)) << f.name << " " << std::hex << bits;
      continue;
    }
    ASSERT_EQ(static_cast<double>(value), exact_value(f, bits))
        << f.name << " " << std::hex << bits;
    ASSERT_EQ(std::signbit(value), (bits & kSign) != 0) << f.name << " " << std::hex << bits;
  }
}

void expect_every_pattern_round_trips(const Format& f) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const uint16_t back = f.from_float(f.to_float(static_cast<uint16_t>(bits)));
    if (f.is_nan(bits)) {
      ASSERT_TRUE(f.is_nan(back)) << f.name << " " << std::hex << bits << " -> " << back;
    } else {
      ASSERT_EQ(back, bits) << f.name << " " << std::hex << bits;
    }
  }
}

// Between every pair of neighbours a < b (the last b being infinity): the
// midpoint goes to the even one, the floats next to it to the nearer one.
void expect_midpoints_tie_to_even(const Format& f) {
  for (uint32_t a = 0; a < f.infinity(); ++a) {
    const double exact_midpoint = (grid_value(f, a) + grid_value(f, a + 1)) / 2;
    const float midpoint = static_cast<float>(exact_midpoint);
    ASSERT_EQ(static_cast<double>(midpoint), exact_midpoint) << "not a float";
    const float above = std::nextafter(midpoint, std::numeric_limits<float>::infinity());
    const float below = std::nextafter(midpoint, 0.0f);
    const uint32_t even = a % 2 == 0 ? a : a + 1;
    for (const uint32_t sign : {0u, kSign}) {
      ASSERT_EQ(f.from_float(with_sign(sign, midpoint)), sign | even)
          << f.name << " midpoint above " << std::hex << (sign | a);
      ASSERT_EQ(f.from_float(with_sign(sign, above)), sign | (a + 1))
          << f.name << " above the midpoint above " << std::hex << (sign | a);
      ASSERT_EQ(f.from_float(with_sign(sign, below)), sign | a)
          << f.name << " below the midpoint above " << std::hex << (sign | a);
    }
  }
}

// Random floats: all bit patterns, and ones whose exponent lies in or near
// the format's range, where rounding decisions happen.
void expect_random_floats_round_exactly(const Format& f, uint32_t seed) {
  std::mt19937 rng(seed);
  const int lowest = std::max(0, 127 - f.bias() - f.mantissa_bits - 3);
  const int highest = std::min(254, 127 + f.bias() + 2);
  for (int trial = 0; trial < 400000; ++trial) {
    uint32_t bits = rng();
    if (trial % 2) {
      const uint32_t exponent = lowest + rng() % (highest - lowest + 1);
      bits = (bits & 0x807fffffu) | (exponent << 23);
    }
    const float value = bits_float(bits);
    if (std::isnan(value)) continue;
    ASSERT_EQ(f.from_float(value), round_exactly(f, value))
        << f.name << " float bits " << std::hex << bits;
  }
}

void expect_nan_stays_nan(const Format& f) {
  for (const uint32_t bits : {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff800001u, 0x7f802000u,
                              0x7f810000u, 0x7fbfffffu, 0x7fffffffu}) {
    const uint16_t result = f.from_float(bits_float(bits));
    EXPECT_TRUE(f.is_nan(result)) << f.name << " " << std::hex << bits << " -> " << result;
  }
}

TEST(Element, HalfDecodesEveryPatternExactly) { expect_every_pattern_decodes_exactly(kHalf); }
TEST(Element, HalfRoundTripsEveryPattern) { expect_every_pattern_round_trips(kHalf); }
TEST(Element, HalfMidpointsTieToEven) { expect_midpoints_tie_to_even(kHalf); }
TEST(Element, HalfRoundsRandomFloatsToNearest) { expect_random_floats_round_exactly(kHalf, 5); }
TEST(Element, HalfKeepsNan) { expect_nan_stays_nan(kHalf); }

TEST(Element, HalfEdgeValues) {
  EXPECT_EQ(float_to_half(1.0f), 0x3c00);
  EXPECT_EQ(float_to_half(-2.0f), 0xc000);
  EXPECT_EQ(float_to_half(65504.0f), 0x7bff);  // the largest finite half
  EXPECT_EQ(float_to_half(65519.996f), 0x7bff);
  EXPECT_EQ(float_to_half(65520.0f), 0x7c00);  // ties to the even neighbour: infinity
  EXPECT_EQ(float_to_half(-65520.0f), 0xfc00);
  EXPECT_EQ(float_to_half(std::numeric_limits<float>::max()), 0x7c00);
  EXPECT_EQ(float_to_half(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(float_to_half(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -14)), 0x0400);  // the smallest normal
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -24)), 0x0001);  // the smallest subnormal
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -25)), 0x0000);  // half of it: ties to zero
  EXPECT_EQ(float_to_half(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(float_to_half(std::ldexp(3.0f, -25)), 0x0002);  // 1.5 steps: ties to 2
  EXPECT_EQ(float_to_half(1e-30f), 0x0000);
  EXPECT_EQ(float_to_half(-1e-30f), 0x8000);
  EXPECT_EQ(float_to_half(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(float_to_half(-std::numeric_limits<float>::denorm_min()), 0x8000);
  EXPECT_EQ(float_to_half(0.0f), 0x0000);
  EXPECT_EQ(float_to_half(-0.0f), 0x8000);
  EXPECT_EQ(half_to_float(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(half_to_float(0x7bff), 65504.0f);
}

TEST(Element, BFloat16DecodesEveryPatternExactly) {
  expect_every_pattern_decodes_exactly(kBFloat16);
}
TEST(Element, BFloat16RoundTripsEveryPattern) { expect_every_pattern_round_trips(kBFloat16); }
TEST(Element, BFloat16MidpointsTieToEven) { expect_midpoints_tie_to_even(kBFloat16); }
TEST(Element, BFloat16RoundsRandomFloatsToNearest) {
  expect_random_floats_round_exactly(kBFloat16, 6);
}
TEST(Element, BFloat16KeepsNan) { expect_nan_stays_nan(kBFloat16); }

TEST(Element, BFloat16EdgeValues) {
  EXPECT_EQ(float_to_bfloat16(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bfloat16(-1.0f), 0xbf80);
  EXPECT_EQ(float_to_bfloat16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);  // tie: stays even
  EXPECT_EQ(float_to_bfloat16(1.0f + std::ldexp(3.0f, -8)), 0x3f82);  // tie: rounds up to even
  EXPECT_EQ(float_to_bfloat16(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(float_to_bfloat16(-std::numeric_limits<float>::max()), 0xff80);
  EXPECT_EQ(float_to_bfloat16(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(float_to_bfloat16(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(float_to_bfloat16(-0.0f), 0x8000);
}

}  // namespace
}  // namespace bwdconv::hip
