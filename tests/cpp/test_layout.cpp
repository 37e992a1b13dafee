// Narrow division: make_divisor's constants (layout.cpp) with divide_position
// (row_index.h) against the divide instruction.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "hip/layout.h"
#include "hip/row_index.h"

namespace bwdconv::hip {
namespace {

// Divisors below 2^31 (small ones, powers of two and their neighbours, the
// largest, random ones) with small, largest and random dividends below 2^31.
TEST(Layout, NarrowDivisionIsExactBelowTwoToThe31) {
  std::mt19937_64 rng(31);
  std::vector<int64_t> divisors;
  for (int64_t d = 1; d <= 300; ++d) divisors.push_back(d);
  for (int shift = 1; shift < 31; ++shift) {
    for (const int64_t delta : {-1, 0, 1}) divisors.push_back((int64_t{1} << shift) + delta);
  }
  divisors.push_back(kNarrowLimit - 1);
  for (int i = 0; i < 2000; ++i) {
    divisors.push_back(1 + static_cast<int64_t>(rng() % (kNarrowLimit - 1)));
  }
  for (const int64_t divisor : divisors) {
    if (divisor >= kNarrowLimit) continue;
    const Divisor step = make_divisor(divisor);
    ASSERT_EQ(step.value, divisor);
    std::vector<int64_t> values{0, 1, divisor - 1, divisor, divisor + 1, kNarrowLimit - 1,
                                kNarrowLimit - 2, (kNarrowLimit - 1) / divisor * divisor,
                                (kNarrowLimit - 1) / divisor * divisor - 1};
    for (int i = 0; i < 200; ++i) values.push_back(static_cast<int64_t>(rng() % kNarrowLimit));
    for (int i = 0; i < 50; ++i) values.push_back(static_cast<int64_t>(rng() % (4 * divisor)));
    for (const int64_t value : values) {
      if (value < 0 || value >= kNarrowLimit) continue;
      ASSERT_EQ(divide_position(static_cast<Position>(value), step), value / divisor)
          << value << " / " << divisor;
    }
  }
}

}  // namespace
}  // namespace bwdconv::hip
