// splitk's kernel-path layout (dispatch/splitk.h, make_splitk_gemm_layout):
// device-sized chunk counts, boxes that cover the reduction once, steps whose
// staging stays under the cap.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "dispatch/splitk.h"

namespace bwdconv {
namespace {

int64_t weight_elements(const ConvGeometry& g) {
  int64_t taps = 1;
  for (int d = 0; d < g.spatial_dims; ++d) taps *= g.filter[d];
  return g.out_channels * g.filter_in_channels * taps;
}

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

TEST(SplitKGemmLayout, SeedShapeFillsAnH100AndAnMI300X) {
  const ConvGeometry g = seed_001();
  for (const int64_t units : {132, 304}) {
    const SplitKGemmLayout l = make_splitk_gemm_layout(g, units, 2, 4);
    // Stride 1: the first dim's 3 taps are read by offset, the other 3 staged.
    EXPECT_EQ(l.offset_taps, 3);
    EXPECT_EQ(l.staged_taps, 3);
    EXPECT_EQ(l.halo_rows, 2);
    EXPECT_EQ(splitk_chunk_tiles(g, l), 1);  // 64 x 48 per offset tap
    // Row ranges over the whole batch: 113 of 2 rows (H100), 225 of 1 (MI300X).
    EXPECT_EQ(l.batch_per_chunk, 16);
    EXPECT_EQ(l.chunks(), units == 132 ? 113 : 225);
    EXPECT_EQ(l.rows_per_chunk, units == 132 ? 2 : 1);
    EXPECT_LE(splitk_step_staged_elements(g, l) * 2, splitk_staging_cap(units));
    EXPECT_EQ(l.step_rows, l.rows_per_chunk);
  }
}

TEST(SplitKGemmLayout, StrideAboveOneStagesEveryTap) {
  ConvGeometry g = seed_001();
  g.stride[0] = 2;
  derive_output_sizes(g);
  const SplitKGemmLayout l = make_splitk_gemm_layout(g, 132, 2, 4);
  EXPECT_EQ(l.offset_taps, 1);
  EXPECT_EQ(l.staged_taps, 9);
  EXPECT_EQ(l.halo_rows, 0);
}

// Random 1-3D geometries and device sizes: the chunks cover every (batch
// row, first-dim output row) once; there are at least 2 of them where the
// reduction has 2 rows, and at most one wave of tiles or the partials cap
// (at least 2 chunks); a step's staging passes its cap only with one row.
TEST(SplitKGemmLayout, ChunksCoverTheReductionOnceWithinTheCaps) {
  std::mt19937_64 rng(15);
  const auto pick = [&](int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(rng() % static_cast<uint64_t>(hi - lo + 1));
  };
  for (int trial = 0; trial < 3000; ++trial) {
    ConvGeometry g;
    g.spatial_dims = static_cast<int>(pick(1, 3));
    g.batch = pick(1, 40);
    g.groups = pick(1, 3);
    g.in_channels = g.groups * pick(1, 24);
    g.out_channels = g.groups * pick(1, 300);
    g.filter_in_channels = g.in_channels / g.groups;
    for (int d = 0; d < g.spatial_dims; ++d) {
      g.filter[d] = pick(1, 4);
      g.stride[d] = pick(1, 3);
      g.dilation[d] = pick(1, 2);
      g.padding[d] = pick(0, 2);
      g.input[d] = g.dilation[d] * (g.filter[d] - 1) + pick(1, trial % 5 == 0 ? 600 : 40);
    }
    derive_output_sizes(g);
    SplitKGemmLimits limits;
    if (trial % 3 == 0) limits.staging_bytes = pick(1, 1 << 16);
    if (trial % 6 == 0) limits.staging_bytes_per_unit = 0;
    if (trial % 4 == 0) limits.partial_bytes = pick(1, 1 << 16);
    const int64_t units = pick(1, 400), staged_bytes = trial % 2 ? 2 : 4;
    const SplitKGemmLayout l = make_splitk_gemm_layout(g, units, staged_bytes, 4, limits);
    SCOPED_TRACE("trial " + std::to_string(trial));

    ASSERT_GE(l.batch_per_chunk, 1);
    ASSERT_GE(l.rows_per_chunk, 1);
    ASSERT_EQ(l.batch_chunks, (g.batch + l.batch_per_chunk - 1) / l.batch_per_chunk);
    ASSERT_EQ(l.space_chunks, (g.output[0] + l.rows_per_chunk - 1) / l.rows_per_chunk);
    // Every (n, o0) in exactly one chunk: chunk (n / b, o0 / rows), none empty.
    std::vector<int> covered(l.chunks(), 0);
    for (int64_t n = 0; n < g.batch; ++n) {
      for (int64_t o = 0; o < g.output[0]; ++o) {
        const int64_t c = (n / l.batch_per_chunk) * l.space_chunks + o / l.rows_per_chunk;
        ASSERT_LT(c, l.chunks());
        ++covered[c];
      }
    }
    ASSERT_TRUE(std::none_of(covered.begin(), covered.end(), [](int k) { return k == 0; }));
    if (g.batch * g.output[0] >= 2) ASSERT_GE(l.chunks(), 2);
    // batch ranges only where the first dim's rows are too few
    if (l.batch_chunks > 1) ASSERT_EQ(l.rows_per_chunk, 1);
    const int64_t w = weight_elements(g) * 4;
    ASSERT_LE(l.chunks(), std::max<int64_t>(2, units / splitk_chunk_tiles(g, l, limits)));
    ASSERT_LE(l.chunks() * w, std::max(limits.partial_bytes, 2 * w));

    const bool by_offset = g.stride[0] == 1 && g.filter[0] > 1;
    ASSERT_EQ(l.offset_taps, by_offset ? g.filter[0] : 1);
    ASSERT_EQ(l.halo_rows, by_offset ? g.dilation[0] * (g.filter[0] - 1) : 0);
    ASSERT_GE(l.step_rows, 1);
    ASSERT_LE(l.step_rows, l.rows_per_chunk);
    if (l.step_rows > 1) {
      ASSERT_LE(splitk_step_staged_elements(g, l) * staged_bytes, splitk_staging_cap(units, limits));
    }
  }
}

}  // namespace
}  // namespace bwdconv
