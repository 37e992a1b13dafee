// Host-side view preparation (steps, walk order, channel packets) and the
// walk itself (unravel_offset, advance_coords) against plain definitions.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "hip/index.h"
#include "hip/layout.h"

namespace bwdconv::hip {
namespace {

TensorView view_of(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides) {
  TensorView view;
  view.dims = static_cast<int>(sizes.size());
  for (int d = 0; d < view.dims; ++d) {
    view.sizes[d] = sizes[d];
    view.strides[d] = strides[d];
  }
  set_size_steps(view);
  return view;
}

std::vector<int> order_of(const TensorView& view) {
  return std::vector<int>(view.order, view.order + view.dims);
}

std::vector<int> memory_order(const std::vector<int64_t>& sizes,
                              const std::vector<int64_t>& strides) {
  TensorView view = view_of(sizes, strides);
  walk_in_memory_order(view);
  return order_of(view);
}

// Dense strides of `sizes` laid out with `layout[0]` outermost.
std::vector<int64_t> dense_strides(const std::vector<int64_t>& sizes,
                                   const std::vector<int>& layout) {
  std::vector<int64_t> strides(sizes.size());
  int64_t stride = 1;
  for (int k = static_cast<int>(layout.size()) - 1; k >= 0; --k) {
    strides[layout[k]] = stride;
    stride *= sizes[layout[k]];
  }
  return strides;
}

// Linear index of `coords` in the view's walk order (order[0] outermost).
int64_t ravel(const TensorView& view, const int64_t* coords) {
  int64_t linear = 0;
  for (int k = 0; k < view.dims; ++k) {
    const int d = view.order[k];
    linear = linear * view.sizes[d] + coords[d];
  }
  return linear;
}

int64_t offset_of(const TensorView& view, const int64_t* coords) {
  int64_t offset = 0;
  for (int d = 0; d < view.dims; ++d) offset += coords[d] * view.strides[d];
  return offset;
}

TEST(Layout, MakeStepShiftsExactlyThePowersOfTwo) {
  for (int shift = 0; shift < 63; ++shift) {
    const Step step = make_step(int64_t{1} << shift);
    EXPECT_EQ(step.value, int64_t{1} << shift);
    EXPECT_EQ(step.shift, shift);
  }
  for (const int64_t value : {3, 5, 6, 7, 9, 10, 12, 15, 17, 24, 100, 1023, 1025, 3 << 20}) {
    const Step step = make_step(value);
    EXPECT_EQ(step.value, value);
    EXPECT_EQ(step.shift, -1) << value;
  }
}

TEST(Layout, DivideAgreesWithQuotientAndRemainder) {
  std::mt19937_64 rng(3);
  std::vector<int64_t> values(2000);
  std::iota(values.begin(), values.begin() + 1000, 0);
  for (size_t i = 1000; i < values.size(); ++i) values[i] = rng() >> (1 + rng() % 62);
  for (int64_t divisor = 1; divisor <= 17; ++divisor) {
    const Step step = make_step(divisor);
    for (const int64_t value : values) {
      int64_t quotient = -1, remainder = -1;
      divide(value, step, &quotient, &remainder);
      ASSERT_EQ(quotient, value / divisor) << value << " / " << divisor;
      ASSERT_EQ(remainder, value % divisor) << value << " % " << divisor;
      if (value >= kNarrowLimit) continue;
      divide<int32_t>(value, step, &quotient, &remainder);
      ASSERT_EQ(quotient, value / divisor) << "narrow " << value << " / " << divisor;
      ASSERT_EQ(remainder, value % divisor) << "narrow " << value << " % " << divisor;
    }
  }
}

// Narrow division against the divide instruction: every divisor below 2^31
// (small ones, powers of two and their neighbours, random ones) with small,
// largest and random dividends below 2^31.
TEST(Layout, NarrowQuotientIsExactBelowTwoToThe31) {
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
    const Step step = make_step(divisor);
    std::vector<int64_t> values{0, 1, divisor - 1, divisor, divisor + 1, kNarrowLimit - 1,
                                kNarrowLimit - 2, (kNarrowLimit - 1) / divisor * divisor,
                                (kNarrowLimit - 1) / divisor * divisor - 1};
    for (int i = 0; i < 200; ++i) values.push_back(static_cast<int64_t>(rng() % kNarrowLimit));
    for (int i = 0; i < 50; ++i) values.push_back(static_cast<int64_t>(rng() % (4 * divisor)));
    for (const int64_t value : values) {
      if (value < 0 || value >= kNarrowLimit) continue;
      ASSERT_EQ(narrow_quotient(static_cast<uint32_t>(value), step), value / divisor)
          << value << " / " << divisor;
    }
  }
}

TEST(Layout, WalksDivideNarrowBelowTwoToThe31Only) {
  const Step steps[3] = {make_step(3), make_step(2), make_step(5)};
  const int64_t no_shift[3] = {0, 0, 0};
  TensorView view = view_of({2, 3, 4, 5, 6}, {360, 120, 30, 6, 1});
  EXPECT_TRUE(walk_divides_narrow(view, steps, no_shift));
  view.sizes[0] = kNarrowLimit / 360;  // just below 2^31 elements
  EXPECT_TRUE(walk_divides_narrow(view, steps, no_shift));
  view.sizes[0] += 1;  // 2^31 elements or more
  EXPECT_FALSE(walk_divides_narrow(view, steps, no_shift));
  view.sizes[0] = 2;
  const Step wide_stride[3] = {make_step(3), make_step(kNarrowLimit + 3), make_step(5)};
  EXPECT_FALSE(walk_divides_narrow(view, wide_stride, no_shift));
  const int64_t shift[3] = {0, 0, kNarrowLimit - 6};  // the last dim's size + shift = 2^31
  EXPECT_FALSE(walk_divides_narrow(view, steps, shift));
}

TEST(Layout, ContiguousKeepsLogicalOrder) {
  EXPECT_EQ(memory_order({2, 3, 4, 5}, {60, 20, 5, 1}), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(memory_order({2, 3, 4, 5, 6}, {360, 120, 30, 6, 1}),
            (std::vector<int>{0, 1, 2, 3, 4}));
}

TEST(Layout, ChannelsLastWalksChannelsInnermost) {
  // [N, C, H, W] = [2, 3, 4, 5] stored as N, H, W, C.
  EXPECT_EQ(memory_order({2, 3, 4, 5}, {60, 1, 15, 3}), (std::vector<int>{0, 2, 3, 1}));
  // [N, C, D, H, W] = [2, 3, 4, 5, 6] stored as N, D, H, W, C.
  EXPECT_EQ(memory_order({2, 3, 4, 5, 6}, {360, 1, 90, 18, 3}),
            (std::vector<int>{0, 2, 3, 4, 1}));
}

TEST(Layout, SizeOneDimsGoOutermostInLogicalOrder) {
  // C = 1 of a channels_last tensor: its stride 1 says nothing.
  EXPECT_EQ(memory_order({2, 1, 4, 5}, {20, 1, 5, 1}), (std::vector<int>{1, 0, 2, 3}));
  // H = 1 with a stride that ties with C's.
  EXPECT_EQ(memory_order({2, 3, 1, 5}, {15, 5, 5, 1}), (std::vector<int>{2, 0, 1, 3}));
  // Several size-1 dims keep their logical order, whatever their strides.
  EXPECT_EQ(memory_order({1, 3, 1, 5}, {1, 5, 99, 1}), (std::vector<int>{0, 2, 1, 3}));
  EXPECT_EQ(memory_order({1, 1, 1}, {7, 3, 1}), (std::vector<int>{0, 1, 2}));
}

TEST(Layout, EqualStridesKeepLogicalOrder) {
  // A broadcast view: N and C both have stride 0.
  EXPECT_EQ(memory_order({2, 3, 4}, {0, 0, 1}), (std::vector<int>{2, 0, 1}));
}

TEST(Layout, MemoryOrderWalksAnyDenseLayoutLinearly) {
  std::mt19937 rng(17);
  for (int trial = 0; trial < 500; ++trial) {
    const int dims = 1 + rng() % kMaxTensorDims;
    std::vector<int64_t> sizes(dims);
    for (auto& s : sizes) s = 1 + rng() % 4;
    std::vector<int> layout(dims);
    std::iota(layout.begin(), layout.end(), 0);
    std::shuffle(layout.begin(), layout.end(), rng);
    TensorView view = view_of(sizes, dense_strides(sizes, layout));
    walk_in_memory_order(view);
    for (int64_t linear = 0; linear < element_count(view); ++linear) {
      int64_t coords[kMaxTensorDims];
      ASSERT_EQ(unravel_offset(linear, view, coords), linear) << "trial " << trial;
    }
  }
}

TEST(Layout, AdvanceCoordsMatchesUnravelOffset) {
  std::mt19937 rng(23);
  for (int trial = 0; trial < 2000; ++trial) {
    TensorView view;
    view.dims = 1 + rng() % kMaxTensorDims;
    for (int d = 0; d < view.dims; ++d) {
      view.sizes[d] = 1 + rng() % 4;
      view.strides[d] = static_cast<int64_t>(rng() % 41) - 10;  // zero and negative too
    }
    std::shuffle(view.order, view.order + view.dims, rng);
    set_size_steps(view);
    int64_t walked[kMaxTensorDims] = {};
    int64_t walked_offset = 0;
    for (int64_t linear = 0; linear < element_count(view); ++linear) {
      if (linear > 0) walked_offset = advance_coords(view, walked, walked_offset);
      int64_t coords[kMaxTensorDims] = {}, narrow[kMaxTensorDims] = {};
      const int64_t offset = unravel_offset(linear, view, coords);
      ASSERT_EQ(unravel_offset<int32_t>(linear, view, narrow), offset) << "trial " << trial;
      for (int d = 0; d < view.dims; ++d) ASSERT_EQ(narrow[d], coords[d]) << "trial " << trial;
      ASSERT_EQ(ravel(view, coords), linear) << "trial " << trial;
      ASSERT_EQ(offset, offset_of(view, coords)) << "trial " << trial;
      for (int d = 0; d < view.dims; ++d) {
        ASSERT_EQ(walked[d], coords[d]) << "trial " << trial << " linear " << linear;
      }
      ASSERT_EQ(walked_offset, offset) << "trial " << trial << " linear " << linear;
    }
  }
}

TEST(Layout, ElementCountIsTheProductOfSizes) {
  EXPECT_EQ(element_count(view_of({2, 3, 4, 5}, {60, 20, 5, 1})), 120);
  EXPECT_EQ(element_count(view_of({2, 0, 4}, {0, 4, 1})), 0);
  EXPECT_EQ(element_count(TensorView{}), 1);
}

constexpr uintptr_t kAligned = 0x10000;

TEST(Layout, PacketOfFloatsWithChannelsAndAddressesAligned) {
  // Channels 8, channels_last strides of [2, 8, 3, 5] except C's own.
  EXPECT_EQ(packet_elements(4, {8, 120, 40, 8}, {kAligned, kAligned + 64}), 4);
  EXPECT_EQ(packet_elements(4, {4}, {kAligned}), 4);
  EXPECT_EQ(packet_elements(4, {}, {}), 4);
}

TEST(Layout, PacketOfFloatsShrinksForAddressesAndStrides) {
  EXPECT_EQ(packet_elements(4, {8, 120}, {kAligned + 8}), 2);   // 8-byte aligned only
  EXPECT_EQ(packet_elements(4, {8, 120}, {kAligned + 4}), 1);   // 4-byte aligned only
  EXPECT_EQ(packet_elements(4, {8, 6}, {kAligned}), 2);         // a stride of 6
  EXPECT_EQ(packet_elements(4, {8, 15}, {kAligned}), 1);        // an odd stride
  EXPECT_EQ(packet_elements(4, {6, 12}, {kAligned}), 2);        // 6 channels
  EXPECT_EQ(packet_elements(4, {3, 12}, {kAligned}), 1);        // 3 channels
}

TEST(Layout, PacketOfDoublesIsAtMostTwo) {
  EXPECT_EQ(packet_elements(8, {64, 128}, {kAligned}), 2);
  EXPECT_EQ(packet_elements(8, {64, 128}, {kAligned + 8}), 1);
  EXPECT_EQ(packet_elements(8, {3}, {kAligned}), 1);
}

TEST(Layout, PacketOfSixteenBitElementsIsUpToEight) {
  EXPECT_EQ(packet_elements(2, {64, 128}, {kAligned}), 8);
  EXPECT_EQ(packet_elements(2, {64, 12}, {kAligned}), 4);
  EXPECT_EQ(packet_elements(2, {64, 128}, {kAligned + 4}), 2);
  EXPECT_EQ(packet_elements(2, {64, 128}, {kAligned + 2}), 1);
  EXPECT_EQ(packet_elements(16, {64}, {kAligned}), 1);
}

bool packet_fits(int element_bytes, int64_t k, const std::vector<int64_t>& multiples,
                 const std::vector<uintptr_t>& addresses) {
  if (k * element_bytes > 16) return false;
  for (const int64_t m : multiples) {
    if (m % k != 0) return false;
  }
  for (const uintptr_t a : addresses) {
    if (a % static_cast<uintptr_t>(k * element_bytes) != 0) return false;
  }
  return true;
}

TEST(Layout, PacketIsTheWidestThatFits) {
  std::mt19937 rng(29);
  for (int trial = 0; trial < 3000; ++trial) {
    const int element_bytes = 1 << (1 + rng() % 3);
    std::vector<int64_t> multiples(rng() % 5);
    for (auto& m : multiples) m = 1 + rng() % 64;
    std::vector<uintptr_t> addresses(rng() % 3);
    for (auto& a : addresses) a = kAligned + element_bytes * (rng() % 16);
    const int64_t k = packet_elements(element_bytes, multiples, addresses);
    ASSERT_TRUE(k == 1 || k == 2 || k == 4 || k == 8) << k;
    ASSERT_TRUE(k == 1 || packet_fits(element_bytes, k, multiples, addresses));
    for (int64_t wider = 2 * k; wider * element_bytes <= 16; wider *= 2) {
      ASSERT_FALSE(packet_fits(element_bytes, wider, multiples, addresses)) << wider;
    }
  }
}

TEST(Layout, WidenStridesDividesAllButTheChannelStride) {
  int64_t strides[5] = {480, 1, 96, 24, 8};
  widen_strides(strides, 5, 8);
  const int64_t expected[5] = {60, 1, 12, 3, 1};
  for (int d = 0; d < 5; ++d) EXPECT_EQ(strides[d], expected[d]) << d;
  int64_t untouched[5] = {480, 1, 96, 24, 8};
  widen_strides(untouched, 3, 2);  // only the first `dims` entries
  EXPECT_EQ(untouched[3], 24);
  EXPECT_EQ(untouched[4], 8);
}

TEST(Layout, WidenedChannelsLastViewAddressesTheSamePackets) {
  const int64_t k = 4;
  // [N, C, H, W] = [2, 8, 3, 5], channels_last.
  const TensorView narrow = view_of({2, 8, 3, 5}, {120, 1, 40, 8});
  TensorView wide = narrow;
  widen_channels(wide, k);
  EXPECT_EQ(wide.sizes[1], 2);
  EXPECT_EQ(wide.strides[1], 1);
  for (int d : {0, 2, 3}) {
    EXPECT_EQ(wide.sizes[d], narrow.sizes[d]) << d;
    EXPECT_EQ(wide.strides[d] * k, narrow.strides[d]) << d;
  }
  // Packet (n, c, h, w) starts at element (n, c*k, h, w) of the narrow view.
  for (int64_t linear = 0; linear < element_count(wide); ++linear) {
    int64_t coords[kMaxTensorDims];
    const int64_t packet = unravel_offset(linear, wide, coords);
    coords[1] *= k;
    ASSERT_EQ(packet * k, offset_of(narrow, coords)) << linear;
  }
}

}  // namespace
}  // namespace bwdconv::hip
