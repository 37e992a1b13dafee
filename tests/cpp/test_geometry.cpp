#include <gtest/gtest.h>

#include <random>

#include "dispatch/geometry.h"

namespace bwdconv {
namespace {

ConvGeometry conv2d(int64_t in_size, int64_t filter, int64_t stride, int64_t padding,
                    int64_t dilation = 1, int64_t groups = 1) {
  ConvGeometry g;
  g.spatial_dims = 2;
  g.batch = 2;
  g.in_channels = 4;
  g.out_channels = 8;
  g.groups = groups;
  g.filter_in_channels = g.in_channels / groups;
  for (int i = 0; i < 2; ++i) {
    g.input[i] = in_size;
    g.filter[i] = filter;
    g.stride[i] = stride;
    g.padding[i] = padding;
    g.dilation[i] = dilation;
  }
  derive_output_sizes(g);
  return g;
}

// Counts output positions o with a whole dilated filter inside the padded input,
// straight from the definition y[o] = sum_k w[k] x[o*s + k*d - p].
int64_t brute_force_output_size(int64_t input, int64_t filter, int64_t stride,
                                int64_t padding, int64_t dilation) {
  int64_t count = 0;
  for (int64_t o = 0;; ++o) {
    const int64_t last = o * stride + (filter - 1) * dilation - padding;
    if (last > input - 1 + padding) break;
    ++count;
  }
  return count;
}

TEST(Geometry, OutputSizeMatchesDefinition) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 5000; ++trial) {
    const int64_t filter = 1 + rng() % 5, stride = 1 + rng() % 4, padding = rng() % 4,
                  dilation = 1 + rng() % 3;
    const int64_t input = dilation * (filter - 1) + 1 - 2 * padding + rng() % 20;
    if (input < 1) continue;
    EXPECT_EQ(conv_output_size(input, filter, stride, padding, dilation),
              brute_force_output_size(input, filter, stride, padding, dilation))
        << "input " << input << " filter " << filter << " stride " << stride << " padding "
        << padding << " dilation " << dilation;
  }
}

TEST(Geometry, OutputSizeOfAFilterLargerThanTheInputIsNotPositive) {
  EXPECT_LE(conv_output_size(2, 5, 1, 0, 1), 0);
  EXPECT_LE(conv_output_size(2, 3, 2, 0, 2), 0);
}

TEST(Geometry, ValidGeometryHasNoError) {
  EXPECT_FALSE(find_geometry_error(conv2d(9, 3, 2, 1)).has_value());
  EXPECT_FALSE(find_geometry_error(conv2d(9, 3, 2, 1, 2, 4)).has_value());
}

void expect_error_mentions(const ConvGeometry& g, const std::string& words) {
  const auto error = find_geometry_error(g);
  ASSERT_TRUE(error.has_value()) << "expected an error mentioning '" << words << "'";
  EXPECT_NE(error->find(words), std::string::npos) << *error;
}

TEST(Geometry, ErrorsNameTheProblem) {
  expect_error_mentions(conv2d(9, 3, 0, 1), "non-positive stride");
  expect_error_mentions(conv2d(9, 3, 1, -1), "negative padding");
  expect_error_mentions(conv2d(9, 3, 1, 1, 0), "dilation");
  expect_error_mentions(conv2d(9, 3, 1, 1, 1, 3), "does not divide the 4 input channels");
  expect_error_mentions(conv2d(2, 5, 1, 0), "can't be greater than the padded input size");
  // The padding makes up for the size, and the output sizes agree: a
  // transposed convolution's output of size -2 would pass as the input.
  ConvGeometry negative_input = conv2d(2, 1, 1, 2);
  negative_input.input[1] = -2;
  negative_input.output[1] = 2;
  expect_error_mentions(negative_input, "input has a negative spatial size: [2, -2]");
  ConvGeometry groups_zero = conv2d(9, 3, 1, 1);
  groups_zero.groups = 0;
  ConvGeometry wrong_channels = conv2d(9, 3, 1, 1);
  wrong_channels.filter_in_channels = 3;
  expect_error_mentions(wrong_channels, "expects an input with 3 channels, but the input has 4");
  expect_error_mentions(groups_zero, "non-positive groups");
  ConvGeometry too_many_dims = conv2d(9, 3, 1, 1);
  too_many_dims.spatial_dims = 4;
  expect_error_mentions(too_many_dims, "expected 1, 2 or 3 spatial dimensions");
}

TEST(Geometry, OutputSizeMustMatchTheInputSize) {
  ConvGeometry g = conv2d(9, 3, 2, 1);
  // Input sizes 9 and 10 both give 5 outputs at stride 2: both are consistent.
  g.input[0] = 10;
  EXPECT_FALSE(find_geometry_error(g).has_value());
  g.output[1] = 6;
  expect_error_mentions(g, "grad_output has spatial size [5, 6]");
}

}  // namespace
}  // namespace bwdconv
