// splitk's chunks (dispatch/splitk.h, make_splitk_geometry): about
// target_chunk reduction steps each, 2 to max_chunks of them, batch ranges
// first, then ranges of the first output dim's rows.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "dispatch/splitk.h"

namespace bwdconv {
namespace {

// convbfp16 -n 16 -c 16 -H 225 -W 225 -k 64 -y 3 -x 3 -p 1 -q 1 -u 1 -v 1 -F 4
ConvGeometry seed_001() {
  ConvGeometry g;
  g.spatial_dims = 2;
  g.batch = 16;
  g.in_channels = g.filter_in_channels = 16;
  g.out_channels = 64;
  for (int d = 0; d < 2; ++d) {
    g.input[d] = 225;
    g.filter[d] = 3;
    g.stride[d] = g.padding[d] = g.dilation[d] = 1;
  }
  derive_output_sizes(g);
  return g;
}

TEST(SplitKGeometry, SeedShapeTakesTwelveBatchRanges) {
  // 16 x 225 x 225 = 810000 reduction steps: floor(810000 / 65536) = 12
  // chunks, all of them batch ranges (16 rows).
  const SplitKGeometry sk = make_splitk_geometry(seed_001());
  EXPECT_EQ(sk.batch_chunks, 12);
  EXPECT_EQ(sk.space_chunks, 1);
}

TEST(SplitKGeometry, OneBatchRowSplitsTheFirstDimsRows) {
  ConvGeometry g = seed_001();
  g.batch = 1;  // 50625 steps: the least, 2 chunks, as row ranges
  const SplitKGeometry sk = make_splitk_geometry(g);
  EXPECT_EQ(sk.batch_chunks, 1);
  EXPECT_EQ(sk.space_chunks, 2);
}

// Random 1-3D geometries: at least 2 chunks where the reduction has 2
// (batch row, first-dim row) pairs, none past its dim's length, and no more
// than the wanted count rounds up to.
TEST(SplitKGeometry, ChunksStayWithinTheirDimsAndTheWantedCount) {
  std::mt19937_64 rng(15);
  const auto pick = [&](int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(rng() % static_cast<uint64_t>(hi - lo + 1));
  };
  const SplitKThresholds t;
  for (int trial = 0; trial < 3000; ++trial) {
    ConvGeometry g;
    g.spatial_dims = static_cast<int>(pick(1, 3));
    g.batch = pick(1, 40);
    g.in_channels = g.filter_in_channels = pick(1, 24);
    g.out_channels = pick(1, 300);
    int64_t reduction = g.batch;
    for (int d = 0; d < g.spatial_dims; ++d) {
      g.filter[d] = pick(1, 4);
      g.stride[d] = pick(1, 3);
      g.dilation[d] = pick(1, 2);
      g.padding[d] = pick(0, 2);
      g.input[d] = g.dilation[d] * (g.filter[d] - 1) + pick(1, trial % 5 == 0 ? 600 : 40);
    }
    derive_output_sizes(g);
    for (int d = 0; d < g.spatial_dims; ++d) reduction *= g.output[d];
    const SplitKGeometry sk = make_splitk_geometry(g);
    SCOPED_TRACE("trial " + std::to_string(trial));

    const int64_t wanted = std::clamp<int64_t>(reduction / t.target_chunk, 2, t.max_chunks);
    ASSERT_GE(sk.batch_chunks, 1);
    ASSERT_LE(sk.batch_chunks, g.batch);
    ASSERT_GE(sk.space_chunks, 1);
    ASSERT_LE(sk.space_chunks, g.output[0]);
    ASSERT_LT(sk.chunks(), wanted + sk.batch_chunks);
    if (g.batch * g.output[0] >= 2) ASSERT_GE(sk.chunks(), 2);
    if (sk.space_chunks > 1) ASSERT_EQ(sk.batch_chunks, g.batch);  // batch ranges first
  }
}

}  // namespace
}  // namespace bwdconv
