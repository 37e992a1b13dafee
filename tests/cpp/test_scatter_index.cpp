#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "hip/layout.h"
#include "hip/scatter_index.h"
#include "dense_views.h"

namespace bwdconv::hip {
namespace {

// Source position of each buffer position the slow way (-1: a zero): start
// from zeros and place src[o] at lead + o*stride, dropping positions outside
// the buffer.
std::vector<int64_t> reference_sources(int64_t buffer, int64_t lead, int64_t stride,
                                       int64_t size) {
  std::vector<int64_t> source(buffer, -1);
  for (int64_t o = 0; o < size; ++o) {
    const int64_t j = lead + o * stride;
    if (j >= 0 && j < buffer) source[j] = o;
  }
  return source;
}

ScatterWalkDim walk_dim(int64_t lead, int64_t stride, int64_t size) {
  ScatterWalkDim dim;
  dim.lead = static_cast<int32_t>(lead);
  dim.step = make_divisor(stride);
  dim.src_size = static_cast<int32_t>(size);
  return dim;
}

TEST(ScatterIndex, SourcePositionMatchesZeroInsertion) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 3000; ++trial) {
    const int64_t stride = 1 + rng() % 8, size = 1 + rng() % 12;
    const int64_t lead = static_cast<int64_t>(rng() % 9) - 4;  // negative lead is a crop
    const int64_t buffer = 1 + rng() % 60;
    const auto expected = reference_sources(buffer, lead, stride, size);
    for (int64_t j = 0; j < buffer; ++j) {
      bool live = true;
      const Position o = source_position(static_cast<Position>(j), walk_dim(lead, stride, size), &live);
      ASSERT_EQ(live ? o : -1, expected[j])
          << "j " << j << " lead " << lead << " stride " << stride << " size " << size;
    }
  }
}

// Cursors moved by advance() agree with cursors computed by division, for
// every stride, lead and advance a walk can have.
TEST(ScatterIndex, RowCursorAdvancesLikeDivision) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 2000; ++trial) {
    const int64_t stride = 1 + rng() % 7, lead = static_cast<int64_t>(rng() % 9) - 3;
    const int element_bytes = 2 << (rng() % 3);
    const int64_t lanes = 16 / element_bytes;
    const RowWalk walk = make_row_walk(1 + rng() % 300, lead, stride, element_bytes);
    const Divisor step = make_divisor(stride);
    const Position first = -static_cast<Position>(rng() % lanes);
    RowCursor at = row_cursor(first, static_cast<Position>(lead), step, walk);
    for (int k = 0; k < 20; ++k) {
      const RowCursor direct = row_cursor(at.first, static_cast<Position>(lead), step, walk);
      ASSERT_EQ(at.o, direct.o) << trial << " " << k;
      ASSERT_EQ(at.r, direct.r) << trial << " " << k;
      ASSERT_EQ(at.o * stride + at.r, at.first - lead);
      ASSERT_TRUE(at.r >= 0 && at.r < stride);
      at.advance(walk, static_cast<int>(lanes), static_cast<Position>(stride));
    }
  }
}

using test_views::view_of;

TEST(ScatterWalk, NchwMergesBatchAndChannelsAndWalksRowsOfW) {
  // src [2, 3, 4, 5] -> buffer [2, 3, 9, 11] (stride 2, lead 1), bfloat16
  const int64_t stride[2] = {2, 2}, lead[2] = {1, 1};
  ScatterParams p;
  ASSERT_TRUE(make_scatter_walk(view_of({2, 3, 4, 5}, false), view_of({2, 3, 9, 11}, false),
                                stride, lead, 2, &p));
  EXPECT_EQ(p.outer_dims, 2);  // [N*C, H]
  EXPECT_EQ(p.outer[0].size.value, 6u);
  EXPECT_EQ(p.outer[1].size.value, 9u);
  EXPECT_EQ(p.row.size.value, 11u);
  EXPECT_EQ(p.row.step.value, 2u);
  EXPECT_EQ(p.rows, 54);
  EXPECT_EQ(p.walk.chunks_per_row, 3);  // (11 + 7) / 8 rounded up
  EXPECT_EQ(p.walk.lane_shift, 0);  // one thread: the row is shorter than a 32-byte sector
  EXPECT_FALSE(p.wide_offsets);
}

TEST(ScatterWalk, ChannelsLastWalksRowsOfChannels) {
  const int64_t stride[2] = {2, 2}, lead[2] = {1, 1};
  ScatterParams p;
  ASSERT_TRUE(make_scatter_walk(view_of({2, 64, 4, 5}, true), view_of({2, 64, 9, 11}, true),
                                stride, lead, 4, &p));
  EXPECT_EQ(p.outer_dims, 3);  // [N, H, W]
  EXPECT_EQ(p.row.size.value, 64u);
  EXPECT_EQ(p.row.step.value, 1u);
  EXPECT_EQ(p.walk.chunks_per_row, 17);  // (64 + 3) / 4 rounded up
  EXPECT_EQ(p.walk.lane_shift, 2);       // 4 threads, about 4 chunks each
  EXPECT_EQ(p.walk.advance_quotient, 16);
  EXPECT_EQ(p.walk.advance_remainder, 0);
}

// The kernel maps the outermost dim one to one: with batch and channels of
// size 1 (dropped) the stepped H would be outermost, so a size-1 dim goes first.
TEST(ScatterWalk, PutsAOneToOneDimFirstWhereTheOutermostIsStepped) {
  const int64_t stride[2] = {2, 2}, lead[2] = {1, 1};
  ScatterParams p;
  ASSERT_TRUE(make_scatter_walk(view_of({1, 1, 4, 5}, false), view_of({1, 1, 9, 11}, false),
                                stride, lead, 2, &p));
  EXPECT_EQ(p.outer_dims, 2);  // [1, H]
  EXPECT_EQ(p.outer[0].size.value, 1u);
  EXPECT_EQ(p.outer[0].step.value, 1u);
  EXPECT_EQ(p.outer[0].lead, 0);
  EXPECT_EQ(p.outer[0].src_size, 1);
  EXPECT_EQ(p.outer[1].size.value, 9u);
  EXPECT_EQ(p.outer[1].step.value, 2u);
  EXPECT_EQ(p.rows, 9);
  EXPECT_TRUE(p.dense);
}

TEST(ScatterWalk, KeepsASizeOneDimThatHoldsNoSource) {
  // W: buffer size 1, lead 1: position 0 is a zero, so the whole buffer is.
  const int64_t stride[2] = {1, 1}, lead[2] = {0, 1};
  ScatterParams p;
  ASSERT_TRUE(make_scatter_walk(view_of({1, 8, 3, 1}, true), view_of({1, 8, 3, 1}, true),
                                stride, lead, 2, &p));
  EXPECT_EQ(p.outer_dims, 2);  // H, and the size-1 W; the size-1 batch dropped
}

TEST(ScatterWalk, RefusesPositionsPast2To31) {
  const int64_t stride[1] = {2}, lead[1] = {0};
  ScatterParams p;
  EXPECT_FALSE(make_scatter_walk(view_of({1, 1, int64_t{1} << 31}, false),
                                 view_of({1, 1, int64_t{1} << 32}, false), stride, lead, 2, &p));
}

}  // namespace
}  // namespace bwdconv::hip
