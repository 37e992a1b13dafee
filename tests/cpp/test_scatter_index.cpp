#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "hip/layout.h"
#include "hip/scatter_index.h"

namespace bwdconv::hip {
namespace {

// The zero-inserted, padded buffer built the slow way: start from zeros and
// place src[o] at lead + o*stride, dropping positions outside the buffer.
std::vector<int64_t> reference_sources(int64_t buffer, int64_t lead, int64_t stride,
                                       int64_t size) {
  std::vector<int64_t> source(buffer, -1);
  for (int64_t o = 0; o < size; ++o) {
    const int64_t j = lead + o * stride;
    if (j >= 0 && j < buffer) source[j] = o;
  }
  return source;
}

TEST(ScatterIndex, MatchesZeroInsertionForRandomDims) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 3000; ++trial) {
    const int64_t stride = 1 + rng() % 8, size = 1 + rng() % 12;
    const int64_t lead = static_cast<int64_t>(rng() % 9) - 4;  // negative lead is a crop
    const int64_t buffer = 1 + rng() % 60;
    const auto expected = reference_sources(buffer, lead, stride, size);
    for (int64_t j = 0; j < buffer; ++j) {
      ASSERT_EQ(scatter_source<int64_t>(j, lead, make_step(stride), size), expected[j])
          << "j " << j << " lead " << lead << " stride " << stride << " size " << size;
      ASSERT_EQ(scatter_source<int32_t>(j, lead, make_step(stride), size), expected[j])
          << "narrow: j " << j << " lead " << lead << " stride " << stride << " size " << size;
    }
  }
}

TEST(ScatterIndex, UnravelFollowsStrides) {
  TensorView view;
  view.dims = 4;
  const int64_t sizes[4] = {2, 3, 4, 5};
  // channels_last strides of a [2, 3, 4, 5] tensor.
  const int64_t strides[4] = {60, 1, 15, 3};
  for (int d = 0; d < 4; ++d) {
    view.sizes[d] = sizes[d];
    view.strides[d] = strides[d];
  }
  set_size_steps(view);
  std::vector<bool> seen(120, false);
  for (int64_t linear = 0; linear < 120; ++linear) {
    int64_t coords[kMaxTensorDims];
    const int64_t offset = unravel_offset(linear, view, coords);
    EXPECT_EQ(offset, coords[0] * 60 + coords[1] + coords[2] * 15 + coords[3] * 3);
    ASSERT_GE(offset, 0);
    ASSERT_LT(offset, 120);
    EXPECT_FALSE(seen[offset]);
    seen[offset] = true;
  }
}

TEST(ScatterIndex, SourceOffsetOfA2dBuffer) {
  // src [1, 1, 2, 3] contiguous, stride 2, lead 1: dst is [1, 1, 5, 7].
  ScatterParams p;
  p.src_view.dims = p.dst_view.dims = 4;
  const int64_t src_sizes[4] = {1, 1, 2, 3}, dst_sizes[4] = {1, 1, 5, 7};
  const int64_t src_strides[4] = {6, 6, 3, 1};
  for (int d = 0; d < 4; ++d) {
    p.src_view.sizes[d] = src_sizes[d];
    p.src_view.strides[d] = src_strides[d];
    p.dst_view.sizes[d] = dst_sizes[d];
  }
  p.stride[0] = p.stride[1] = make_step(2);
  p.lead[0] = p.lead[1] = 1;
  EXPECT_TRUE(scatter_divides_narrow(p));
  for (int64_t h = 0; h < 5; ++h) {
    for (int64_t w = 0; w < 7; ++w) {
      const int64_t coords[4] = {0, 0, h, w};
      const bool filled = h % 2 == 1 && w % 2 == 1 && w < 6;
      const int64_t expected = filled ? (h / 2) * 3 + w / 2 : -1;
      EXPECT_EQ(scatter_source_offset<int64_t>(p, coords), expected) << h << "," << w;
      EXPECT_EQ(scatter_source_offset<int32_t>(p, coords), expected) << h << "," << w;
    }
  }
}

TEST(ScatterIndex, NarrowOnlyWhileCoordinateMinusLeadFits) {
  ScatterParams p;
  p.dst_view.dims = 3;
  const int64_t sizes[3] = {4, 8, 1000};
  std::copy(sizes, sizes + 3, p.dst_view.sizes);
  p.stride[0] = make_step(3);
  p.lead[0] = 1000;  // a positive lead only lowers j - lead
  EXPECT_TRUE(scatter_divides_narrow(p));
  p.lead[0] = -(kNarrowLimit - 1000);  // a crop: j - lead reaches 2^31
  EXPECT_FALSE(scatter_divides_narrow(p));
}

}  // namespace
}  // namespace bwdconv::hip
