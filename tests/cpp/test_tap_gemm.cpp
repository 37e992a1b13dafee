// swap1x1's epilogue writer, the tap_gemm kernel, on the host grid
// (portability.h, "host target"; warp_mma.h's host products), against a
// reference written with plain loops: dx[n, c, s*q + t*d - p] = sum_o
// w[o, c, t] dy[n, o, q] for each tap t and position q inside dx, zero at
// the cell's other positions s*q - p + r (0 <= r < s), and dx elements in no
// cell keep what they held. Values are small integers (|sum| < 256), so
// every sum is exact in float16 and bfloat16 and results must be equal. The
// sanitizer builds (CMakeLists.txt) run this file too.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "hip/element.h"
#include "hip/tap_gemm.h"
#include "dense_views.h"

namespace bwdconv::hip {
namespace {

struct TapGemmCase {
  int64_t batch, channels, out_channels;
  std::vector<int64_t> input, filter, stride, padding, dilation;  // per spatial dim
  bool channels_last;
};

std::string describe(const TapGemmCase& c) {
  std::string text = "N" + std::to_string(c.batch) + " C" + std::to_string(c.channels) + " O" +
                     std::to_string(c.out_channels) + (c.channels_last ? " CL" : " NCHW");
  const auto list = [&](const char* name, const std::vector<int64_t>& v) {
    text += std::string(" ") + name;
    for (const int64_t x : v) text += " " + std::to_string(x);
  };
  list("in", c.input);
  list("k", c.filter);
  list("s", c.stride);
  list("p", c.padding);
  list("d", c.dilation);
  return text;
}

using test_views::offset_of;
using test_views::view_of;

int64_t elements(const TensorView& v) {
  int64_t n = 1;
  for (int d = 0; d < v.dims; ++d) n *= v.sizes[d];
  return n;
}

// Calls f(coords) for every coordinate vector of `sizes`, row-major.
template <typename F>
void for_each_index(const std::vector<int64_t>& sizes, F&& f) {
  std::vector<int64_t> at(sizes.size(), 0);
  for (const int64_t s : sizes) {
    if (s == 0) return;
  }
  while (true) {
    f(at);
    int d = static_cast<int>(sizes.size()) - 1;
    while (d >= 0 && ++at[d] == sizes[d]) at[d--] = 0;
    if (d < 0) return;
  }
}

template <typename T>
float value_of(T element);
template <>
float value_of(Half h) { return half_to_float(h.bits); }
template <>
float value_of(BFloat16 b) { return bfloat16_to_float(b.bits); }

template <typename T>
T element_of(int v) {
  return FromAccumulator<T>::convert(static_cast<float>(v));  // small integers: exact
}

// grad_output's spatial sizes: the transposed convolution's input, whose
// outputs (s*(Q-1) + d*(K-1) + 1 - 2p) are dx's sizes or up to s-1 more.
std::vector<int64_t> grad_output_sizes(const TapGemmCase& c) {
  std::vector<int64_t> q;
  for (size_t i = 0; i < c.input.size(); ++i) {
    q.push_back((c.input[i] + 2 * c.padding[i] - c.dilation[i] * (c.filter[i] - 1) - 1) /
                    c.stride[i] + 1);
  }
  return q;
}

template <typename T>
void expect_reference(const TapGemmCase& c, ElementType element, std::mt19937& rng) {
  const std::vector<int64_t> q = grad_output_sizes(c);
  std::vector<int64_t> dy_sizes{c.batch, c.out_channels}, w_sizes{c.out_channels, c.channels},
      dx_sizes{c.batch, c.channels};
  dy_sizes.insert(dy_sizes.end(), q.begin(), q.end());
  w_sizes.insert(w_sizes.end(), c.filter.begin(), c.filter.end());
  dx_sizes.insert(dx_sizes.end(), c.input.begin(), c.input.end());
  TapGemmParams p;
  p.grad_output_view = view_of(dy_sizes, c.channels_last);
  const TensorView w_view = view_of(w_sizes, false);
  p.dx_view = view_of(dx_sizes, c.channels_last);
  std::uniform_int_distribution<int> small(-2, 2);
  std::vector<T> dy(elements(p.grad_output_view)), w(elements(w_view));
  for (T& v : dy) v = element_of<T>(small(rng));
  for (T& v : w) v = element_of<T>(small(rng));
  const T sentinel = element_of<T>(1000);
  std::vector<T> dx(elements(p.dx_view), sentinel);
  // The rows operand (TapGemmParams): row c*T + t = w[:, c, t], zeros to a
  // multiple of 8; a nonzero past O would show in the sums.
  const int64_t taps = elements(w_view) / (c.out_channels * c.channels);
  p.row_elements = (c.out_channels + 7) / 8 * 8;
  std::vector<T> rows(c.channels * taps * p.row_elements, element_of<T>(0));
  for (int64_t o = 0; o < c.out_channels; ++o) {
    for (int64_t ct = 0; ct < c.channels * taps; ++ct) {
      rows[ct * p.row_elements + o] = w[o * c.channels * taps + ct];
    }
  }
  p.grad_output = dy.data();
  p.rows = rows.data();
  p.dx = dx.data();
  const int dims = static_cast<int>(c.input.size());
  for (int i = 0; i < dims; ++i) {
    p.filter[i] = c.filter[i];
    p.stride[i] = c.stride[i];
    p.padding[i] = c.padding[i];
    p.dilation[i] = c.dilation[i];
  }
  p.element = static_cast<int>(element);
  ASSERT_EQ(launch_tap_gemm<Target::host>(p, nullptr), nullptr) << describe(c);

  std::vector<float> expected(dx.size(), value_of(sentinel));
  // Each position q's cell: zeros, then the products over them.
  std::vector<int64_t> cell_sizes{c.batch, c.channels};
  cell_sizes.insert(cell_sizes.end(), q.begin(), q.end());
  cell_sizes.insert(cell_sizes.end(), c.stride.begin(), c.stride.end());
  for_each_index(cell_sizes, [&](const std::vector<int64_t>& at) {  // n, c, q..., r...
    std::vector<int64_t> at_dx{at[0], at[1]};
    for (int i = 0; i < dims; ++i) {
      const int64_t x = c.stride[i] * at[2 + i] + at[2 + dims + i] - c.padding[i];
      if (x < 0 || x >= c.input[i]) return;
      at_dx.push_back(x);
    }
    expected[offset_of(p.dx_view, at_dx)] = 0.0f;
  });
  for_each_index(dy_sizes, [&](const std::vector<int64_t>& at_dy) {  // n, o, q...
    if (at_dy[1] != 0) return;
    for_each_index(w_sizes, [&](const std::vector<int64_t>& at_w) {  // o, c, t...
      if (at_w[0] != 0) return;
      std::vector<int64_t> at_dx{at_dy[0], at_w[1]};
      for (int i = 0; i < dims; ++i) {
        const int64_t x = c.stride[i] * at_dy[2 + i] + c.dilation[i] * at_w[2 + i] - c.padding[i];
        if (x < 0 || x >= c.input[i]) return;
        at_dx.push_back(x);
      }
      float sum = 0;
      for (int64_t o = 0; o < c.out_channels; ++o) {
        std::vector<int64_t> dy_at = at_dy, w_at = at_w;
        dy_at[1] = o;
        w_at[0] = o;
        sum += value_of(dy[offset_of(p.grad_output_view, dy_at)]) *
               value_of(w[offset_of(w_view, w_at)]);
      }
      expected[offset_of(p.dx_view, at_dx)] = sum;
    });
  });
  for (size_t e = 0; e < dx.size(); ++e) {
    ASSERT_EQ(value_of(dx[e]), expected[e]) << describe(c) << " element " << e;
  }
}

// A filter within the stride (d(K-1)+1 <= s, swap1x1's condition), random
// padding below the dilated filter, and dx from the transposed convolution's
// output with up to s-1 extra elements (output padding).
TapGemmCase random_case(std::mt19937& rng) {
  const auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  TapGemmCase c;
  const int dims = static_cast<int>(pick(1, 3));
  c.batch = pick(1, 3);
  c.channels = pick(1, 40);
  c.out_channels = pick(1, 48);
  c.channels_last = pick(0, 1) == 1;
  int64_t taps = 1;
  for (int i = 0; i < dims; ++i) {
    const int64_t s = pick(1, 4);
    int64_t k = pick(1, s);
    while (taps * k > kTapGemmMaxTaps) --k;
    const int64_t d = k > 1 ? pick(1, (s - 1) / (k - 1)) : 1;
    const int64_t extent = d * (k - 1) + 1;
    const int64_t p = pick(0, extent - 1);
    const int64_t q = pick(1, dims == 3 ? 4 : 9);
    const int64_t out = s * (q - 1) + extent - 2 * p;
    taps *= k;
    c.stride.push_back(s);
    c.filter.push_back(k);
    c.dilation.push_back(d);
    c.padding.push_back(out >= 1 ? p : 0);
    c.input.push_back((out >= 1 ? out : s * (q - 1) + extent) + pick(0, s - 1));
  }
  return c;
}

TEST(HostTapGemm, RandomShapesFloat16) {
  std::mt19937 rng(41);
  for (int i = 0; i < 24; ++i) expect_reference<Half>(random_case(rng), ElementType::Float16, rng);
}

TEST(HostTapGemm, RandomShapesBFloat16) {
  std::mt19937 rng(4141);
  for (int i = 0; i < 24; ++i) {
    expect_reference<BFloat16>(random_case(rng), ElementType::BFloat16, rng);
  }
}

// U-Net's kernel = stride, NCHW, several row and column blocks (C*T = 96
// rows over two blocks, N*Q = 128 columns over two, O past one depth step):
// Q = 64 positions, so the block reads grad_output 8 columns at a time.
TEST(HostTapGemm, KernelEqualsStrideFillsDx) {
  std::mt19937 rng(2);
  const TapGemmCase c{2, 24, 40, {16, 16}, {2, 2}, {2, 2}, {0, 0}, {1, 1}, false};
  expect_reference<BFloat16>(c, ElementType::BFloat16, rng);
}

// The same in channels_last, O = 40: grad_output read 8 channels at a time.
TEST(HostTapGemm, KernelEqualsStrideChannelsLast) {
  std::mt19937 rng(3);
  const TapGemmCase c{2, 24, 40, {16, 16}, {2, 2}, {2, 2}, {0, 0}, {1, 1}, true};
  expect_reference<Half>(c, ElementType::Float16, rng);
}

// More than 32 taps (4x4x3 = 48): one channel a block, so the two threads
// of a column split its cell rows instead of its channels; both layouts.
TEST(HostTapGemm, MoreThan32TapsOneChannelABlock) {
  std::mt19937 rng(5);
  for (const bool channels_last : {false, true}) {
    const TapGemmCase c{2, 3, 8, {9, 8, 7}, {4, 4, 3}, {4, 4, 3}, {1, 0, 0}, {1, 1, 1},
                        channels_last};
    expect_reference<BFloat16>(c, ElementType::BFloat16, rng);
  }
}

// Each of grad_output's walks with padding, dilation, a 3D cell and holes:
// Q a multiple of 8 in NCHW (8 columns per load), O a multiple of 8 in
// channels_last (8 channels per load), and neither (one element per load).
TEST(HostTapGemm, EveryGradOutputWalk) {
  std::mt19937 rng(5);
  const std::vector<TapGemmCase> cases{
      {2, 5, 24, {10, 14}, {1, 2}, {3, 2}, {0, 1}, {2, 1}, false},         // columns: Q = 4x8
      {1, 7, 16, {8, 6, 8}, {2, 1, 2}, {2, 3, 2}, {1, 0, 0}, {1, 1, 1}, true},  // channels
      {3, 9, 13, {11, 7}, {1, 2}, {3, 3}, {0, 1}, {1, 1}, false},         // elements
      {2, 3, 12, {7, 9}, {2, 2}, {3, 4}, {1, 0}, {1, 2}, true},           // elements (O % 8)
  };
  for (const TapGemmCase& c : cases) expect_reference<BFloat16>(c, ElementType::BFloat16, rng);
}

TEST(HostTapGemm, RefusesOtherElementsTooManyTapsAndUnpaddedRows) {
  TapGemmParams p;
  std::vector<uint16_t> rows(64, 0);
  p.rows = rows.data();
  p.row_elements = 8;
  p.dx_view = view_of({1, 1, 4}, false);
  p.grad_output_view = view_of({1, 1, 2}, false);
  p.filter[0] = 2;
  p.stride[0] = 2;
  p.element = static_cast<int>(ElementType::Float32);
  EXPECT_STREQ(launch_tap_gemm<Target::host>(p, nullptr), kInvalidLaunch);
  p.element = static_cast<int>(ElementType::Float16);
  p.row_elements = 4;  // not a multiple of 8
  EXPECT_STREQ(launch_tap_gemm<Target::host>(p, nullptr), kInvalidLaunch);
  p.row_elements = 8;
  p.filter[0] = 5;  // 5x5x3: 75 taps
  p.filter[1] = 5;
  p.filter[2] = 3;
  p.dx_view = view_of({1, 1, 5, 5, 3}, false);
  p.grad_output_view = view_of({1, 1, 1, 1, 1}, false);
  EXPECT_STREQ(launch_tap_gemm<Target::host>(p, nullptr), kInvalidLaunch);
}

}  // namespace
}  // namespace bwdconv::hip
