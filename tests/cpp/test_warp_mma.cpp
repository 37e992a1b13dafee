// warp_mma.h's host definition: its products against plain loops, in both
// layouts of B and of the stored sums, and its check of what the tensor cores require of a tile
// (32-byte aligned start, ld a multiple of 8 elements, of 4 floats for the
// accumulator), which a GPU enforces and the host grid must not let pass.
#define BWDCONV_HOST_TARGET 1
#include "hip/warp_mma.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <type_traits>

namespace bwdconv::hip {
namespace {

constexpr int kLd = 24;  // a multiple of 8, wider than the tile

// The calling thread as lane 0 of a warp, the lane that acts for it (outside
// a grid a thread is no lane at all).
void act_as_first_lane() { host::lane.thread = host::Dim3(0, 0, 0); }

// Small integers: every product and sum is exact in float.
float value_at(int i, int j, int seed) { return static_cast<float>((i * 7 + j * 3 + seed) % 9 - 4); }

struct alignas(32) Tiles {
  uint16_t a[kMmaTile * kLd];
  uint16_t b[kMmaTile * kLd];
  float c[kMmaTile * kLd];
};

template <typename Layout>
void expect_product() {
  act_as_first_lane();
  Tiles t{};
  constexpr bool column_major = std::is_same_v<Layout, ColumnMajor>;
  for (int i = 0; i < kMmaTile; ++i) {
    for (int j = 0; j < kMmaTile; ++j) {
      t.a[i * kLd + j] = float_to_half(value_at(i, j, 1));
      t.b[column_major ? i + j * kLd : i * kLd + j] = float_to_half(value_at(i, j, 5));
    }
  }
  MmaA<Half> a;
  MmaB<Half, Layout> b;
  MmaAccumulator c;
  mma_load<Half>(a, t.a, kLd);
  mma_load<Half>(b, t.b, kLd);
  mma_zero(c);
  mma<Half>(c, a, b);
  mma<Half>(c, a, b);  // c accumulates: twice the product
  mma_store(t.c, c, kLd, column_major);  // the sums in B's layout
  for (int i = 0; i < kMmaTile; ++i) {
    for (int j = 0; j < kMmaTile; ++j) {
      float expected = 0;
      for (int k = 0; k < kMmaTile; ++k) expected += value_at(i, k, 1) * value_at(k, j, 5);
      EXPECT_EQ(t.c[column_major ? i + j * kLd : i * kLd + j], 2 * expected)
          << "at " << i << ", " << j;
    }
  }
}

TEST(HostWarpMma, ProductRowMajorB) { expect_product<RowMajor>(); }
TEST(HostWarpMma, ProductColumnMajorB) { expect_product<ColumnMajor>(); }

TEST(HostWarpMmaDeathTest, TileTheTensorCoresRefuse) {
  act_as_first_lane();
  Tiles t{};
  MmaA<Half> a;
  MmaB<Half, ColumnMajor> b;
  MmaAccumulator c;
  mma_zero(c);
  const char* message = "the tensor cores need a 32-byte aligned start";
  EXPECT_DEATH(mma_load<Half>(a, t.a + 8, kLd), message);  // 16 bytes off
  EXPECT_DEATH(mma_load<Half>(b, t.b, 12), message);       // ld not a multiple of 8
  EXPECT_DEATH(mma_store(t.c + 4, c, kLd, false), message);  // 16 bytes off
  EXPECT_DEATH(mma_store(t.c, c, 18, true), message);         // ld not a multiple of 4
}

}  // namespace
}  // namespace bwdconv::hip
