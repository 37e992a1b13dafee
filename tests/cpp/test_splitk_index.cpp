// The splitk kernels' loops emulated on the CPU with their index functions,
// against the weight gradient written with plain loops; and the chunking of
// the reduction.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "hip/splitk_index.h"

namespace bwdconv::hip {
namespace {

TEST(SplitKIndex, ChunksPartitionTheReductionEvenly) {
  std::mt19937_64 rng(8);
  for (int trial = 0; trial < 5000; ++trial) {
    const int64_t reduction = trial < 2500 ? static_cast<int64_t>(rng() % 200)
                                           : static_cast<int64_t>(rng() % 1000000000000);
    const int64_t chunks = 1 + rng() % (trial % 3 == 0 ? 4096 : 20);
    ASSERT_EQ(chunk_begin(reduction, chunks, 0), 0);
    ASSERT_EQ(chunk_begin(reduction, chunks, chunks), reduction);
    const int64_t floor_size = reduction / chunks;
    const int64_t ceil_size = floor_size + (reduction % chunks != 0);
    for (int64_t j = 0; j < chunks; ++j) {
      const int64_t size =
          chunk_begin(reduction, chunks, j + 1) - chunk_begin(reduction, chunks, j);
      ASSERT_TRUE(size == floor_size || size == ceil_size)
          << "R " << reduction << " chunks " << chunks << " j " << j << " size " << size;
    }
  }
}

// A convolution with unused spatial dims padded to size 1 (filter 1, stride 1,
// no padding, dilation 1), so the reference can always loop over three.
struct Problem {
  int dims = 1;
  int64_t batch = 1, groups = 1, in_per_group = 1, out_per_group = 1;
  int64_t input[3] = {1, 1, 1}, filter[3] = {1, 1, 1}, output[3] = {1, 1, 1};
  int64_t stride[3] = {1, 1, 1}, padding[3] = {0, 0, 0}, dilation[3] = {1, 1, 1};
  bool dy_channels_last = false, x_channels_last = false;

  int64_t dilated_filter(int i) const { return dilation[i] * (filter[i] - 1) + 1; }
  void derive_output() {
    for (int i = 0; i < dims; ++i) {
      output[i] = (input[i] + 2 * padding[i] - dilated_filter(i)) / stride[i] + 1;
    }
  }
  int64_t in_channels() const { return groups * in_per_group; }
  int64_t out_channels() const { return groups * out_per_group; }
  std::vector<int64_t> dy_sizes() const { return sizes_with(out_channels(), output); }
  std::vector<int64_t> x_sizes() const { return sizes_with(in_channels(), input); }
  std::vector<int64_t> sizes_with(int64_t channels, const int64_t* spatial) const {
    std::vector<int64_t> sizes{batch, channels};
    sizes.insert(sizes.end(), spatial, spatial + dims);
    return sizes;
  }
};

int64_t product(const std::vector<int64_t>& sizes) {
  int64_t count = 1;
  for (const int64_t s : sizes) count *= s;
  return count;
}

Problem random_problem(std::mt19937& rng) {
  Problem pr;
  pr.dims = 1 + rng() % 3;
  pr.batch = 1 + rng() % 3;
  pr.groups = 1 + rng() % 3;
  pr.in_per_group = 1 + rng() % 3;
  pr.out_per_group = 1 + rng() % 3;
  for (int i = 0; i < pr.dims; ++i) {
    pr.filter[i] = 1 + rng() % (pr.dims == 3 ? 3 : 4);
    pr.stride[i] = 1 + rng() % 3;
    pr.dilation[i] = 1 + rng() % 3;
    pr.padding[i] = rng() % 3;
    pr.input[i] = std::max<int64_t>(1, pr.dilated_filter(i) - 2 * pr.padding[i]) +
                  rng() % (pr.dims == 3 ? 3 : 6);
  }
  pr.derive_output();
  pr.dy_channels_last = rng() % 2;
  pr.x_channels_last = rng() % 2;
  return pr;
}

// Element strides of a dense [N, C, spatial...] tensor, channels innermost
// when channels_last.
std::vector<int64_t> dense_strides(const std::vector<int64_t>& sizes, bool channels_last) {
  std::vector<int> layout{0};
  for (int d = 2; d < static_cast<int>(sizes.size()); ++d) layout.push_back(d);
  layout.insert(channels_last ? layout.end() : layout.begin() + 1, 1);
  std::vector<int64_t> strides(sizes.size());
  int64_t stride = 1;
  for (int k = static_cast<int>(layout.size()) - 1; k >= 0; --k) {
    strides[layout[k]] = stride;
    stride *= sizes[layout[k]];
  }
  return strides;
}

TensorView view_of(const std::vector<int64_t>& sizes, bool channels_last) {
  TensorView view;
  view.dims = static_cast<int>(sizes.size());
  const auto strides = dense_strides(sizes, channels_last);
  std::copy(sizes.begin(), sizes.end(), view.sizes);
  std::copy(strides.begin(), strides.end(), view.strides);
  return view;
}

SplitKParams splitk_params(const Problem& pr, int64_t chunks) {
  SplitKParams p;
  p.grad_output_view = view_of(pr.dy_sizes(), pr.dy_channels_last);
  p.input_view = view_of(pr.x_sizes(), pr.x_channels_last);
  p.spatial_dims = pr.dims;
  p.groups = pr.groups;
  p.out_per_group = pr.out_per_group;
  p.in_per_group = pr.in_per_group;
  p.taps = 1;
  p.reduction = pr.batch;
  for (int i = 0; i < pr.dims; ++i) {
    p.filter[i] = pr.filter[i];
    p.stride[i] = pr.stride[i];
    p.padding[i] = pr.padding[i];
    p.dilation[i] = pr.dilation[i];
    p.taps *= pr.filter[i];
    p.reduction *= pr.output[i];
  }
  p.columns = pr.in_per_group * p.taps;
  p.chunks = chunks;
  return p;
}

// Logical values (row-major over sizes) stored at their strided positions.
std::vector<double> store_strided(const std::vector<double>& logical,
                                  const std::vector<int64_t>& sizes, bool channels_last) {
  const auto strides = dense_strides(sizes, channels_last);
  std::vector<double> stored(logical.size());
  for (int64_t flat = 0; flat < static_cast<int64_t>(logical.size()); ++flat) {
    int64_t rest = flat, offset = 0;
    for (int d = static_cast<int>(sizes.size()) - 1; d >= 0; --d) {
      offset += (rest % sizes[d]) * strides[d];
      rest /= sizes[d];
    }
    stored[offset] = logical[flat];
  }
  return stored;
}

std::vector<double> random_values(std::mt19937& rng, int64_t count) {
  std::vector<double> values(count);
  for (auto& v : values) v = static_cast<double>(static_cast<int>(rng() % 9) - 4);
  return values;
}

// dw[oc][c][k] = sum over n, o of dy[n][oc][o] * x[n][g*C + c][o*s + k*d - p],
// all tensors row-major, spatial dims padded to three.
std::vector<double> reference_weight_gradient(const Problem& pr, const std::vector<double>& dy,
                                              const std::vector<double>& x) {
  const int64_t C = pr.in_per_group, M = pr.out_per_group;
  const int64_t* O = pr.output;
  const int64_t* I = pr.input;
  const int64_t* K = pr.filter;
  std::vector<double> dw(pr.out_channels() * C * K[0] * K[1] * K[2], 0.0);
  for (int64_t n = 0; n < pr.batch; ++n)
  for (int64_t oc = 0; oc < pr.out_channels(); ++oc)
  for (int64_t c = 0; c < C; ++c)
  for (int64_t k0 = 0; k0 < K[0]; ++k0)
  for (int64_t k1 = 0; k1 < K[1]; ++k1)
  for (int64_t k2 = 0; k2 < K[2]; ++k2)
  for (int64_t o0 = 0; o0 < O[0]; ++o0)
  for (int64_t o1 = 0; o1 < O[1]; ++o1)
  for (int64_t o2 = 0; o2 < O[2]; ++o2) {
    const int64_t i0 = o0 * pr.stride[0] + k0 * pr.dilation[0] - pr.padding[0];
    const int64_t i1 = o1 * pr.stride[1] + k1 * pr.dilation[1] - pr.padding[1];
    const int64_t i2 = o2 * pr.stride[2] + k2 * pr.dilation[2] - pr.padding[2];
    if (i0 < 0 || i0 >= I[0] || i1 < 0 || i1 >= I[1] || i2 < 0 || i2 >= I[2]) continue;
    const int64_t ic = (oc / M) * C + c;
    const int64_t dy_flat = (((n * pr.out_channels() + oc) * O[0] + o0) * O[1] + o1) * O[2] + o2;
    const int64_t x_flat = (((n * pr.in_channels() + ic) * I[0] + i0) * I[1] + i1) * I[2] + i2;
    const double dy_value = dy[dy_flat], x_value = x[x_flat];
    dw[(((oc * C + c) * K[0] + k0) * K[1] + k1) * K[2] + k2] += dy_value * x_value;
  }
  return dw;
}

// The partials kernel (one sum per chunk, group, row and column over the
// chunk's reduction range) and the reduce kernel (chunks added in order).
std::vector<double> emulate_splitk(const SplitKParams& p, const std::vector<double>& dy,
                                   const std::vector<double>& x) {
  const int64_t elements = p.groups * p.out_per_group * p.columns;
  std::vector<double> partials(p.chunks * elements);
  for (int64_t chunk = 0; chunk < p.chunks; ++chunk) {
    const int64_t begin = chunk_begin(p.reduction, p.chunks, chunk);
    const int64_t end = chunk_begin(p.reduction, p.chunks, chunk + 1);
    for (int64_t group = 0; group < p.groups; ++group) {
      for (int64_t row = 0; row < p.out_per_group; ++row) {
        const int64_t out_channel = group * p.out_per_group + row;
        for (int64_t col = 0; col < p.columns; ++col) {
          int64_t tap[kMaxSpatialDims] = {};
          const int64_t in_channel = group * p.in_per_group + column_tap(p, col, tap);
          double sum = 0;
          for (int64_t r = begin; r < end; ++r) {
            int64_t position[kMaxSpatialDims] = {};
            const int64_t n = reduction_position(p, r, position);
            const int64_t offset = input_offset(p, n, in_channel, position, tap);
            if (offset < 0) continue;
            sum += dy[grad_output_offset(p, n, out_channel, position)] * x[offset];
          }
          partials[chunk * elements + out_channel * p.columns + col] = sum;
        }
      }
    }
  }
  std::vector<double> dw(elements, 0.0);
  for (int64_t chunk = 0; chunk < p.chunks; ++chunk) {
    for (int64_t e = 0; e < elements; ++e) dw[e] += partials[chunk * elements + e];
  }
  return dw;
}

std::string describe(const Problem& pr, int64_t chunks) {
  std::string text = "N " + std::to_string(pr.batch) + " groups " + std::to_string(pr.groups) +
                     " C " + std::to_string(pr.in_per_group) + " M " +
                     std::to_string(pr.out_per_group) + " chunks " + std::to_string(chunks) +
                     (pr.dy_channels_last ? " dy:cl" : " dy:c") +
                     (pr.x_channels_last ? " x:cl" : " x:c") + " | I/K/s/p/d";
  for (int i = 0; i < pr.dims; ++i) {
    text += " " + std::to_string(pr.input[i]) + "/" + std::to_string(pr.filter[i]) + "/" +
            std::to_string(pr.stride[i]) + "/" + std::to_string(pr.padding[i]) + "/" +
            std::to_string(pr.dilation[i]);
  }
  return text;
}

void expect_emulation_matches_reference(const Problem& pr, int64_t chunks, std::mt19937& rng) {
  const auto dy = random_values(rng, product(pr.dy_sizes()));
  const auto x = random_values(rng, product(pr.x_sizes()));
  const SplitKParams p = splitk_params(pr, chunks);
  const auto dw = emulate_splitk(p, store_strided(dy, pr.dy_sizes(), pr.dy_channels_last),
                                 store_strided(x, pr.x_sizes(), pr.x_channels_last));
  ASSERT_EQ(dw, reference_weight_gradient(pr, dy, x)) << describe(pr, chunks);
}

TEST(SplitKIndex, EmulatedKernelsMatchTheWeightGradient) {
  std::mt19937 rng(123);
  int more_chunks_than_steps = 0;
  for (int trial = 0; trial < 600; ++trial) {
    const Problem pr = random_problem(rng);
    const int64_t chunks = 1 + rng() % 7;
    more_chunks_than_steps += chunks > splitk_params(pr, chunks).reduction;
    ASSERT_NO_FATAL_FAILURE(expect_emulation_matches_reference(pr, chunks, rng))
        << "trial " << trial;
  }
  EXPECT_GT(more_chunks_than_steps, 10);
}

TEST(SplitKIndex, MoreChunksThanReductionSteps) {
  // N = 2 with a 1x1 output: two reduction steps for up to seven chunks.
  Problem pr;
  pr.dims = 2;
  pr.batch = 2;
  pr.groups = 2;
  pr.in_per_group = 3;
  pr.out_per_group = 2;
  for (int i = 0; i < 2; ++i) {
    pr.input[i] = 3;
    pr.filter[i] = 2;
    pr.stride[i] = 3;
    pr.padding[i] = 1;
    pr.dilation[i] = 2;
  }
  pr.x_channels_last = true;
  pr.derive_output();
  std::mt19937 rng(9);
  for (int64_t chunks = 1; chunks <= 7; ++chunks) {
    ASSERT_EQ(splitk_params(pr, chunks).reduction, 2);
    ASSERT_NO_FATAL_FAILURE(expect_emulation_matches_reference(pr, chunks, rng));
  }
}

}  // namespace
}  // namespace bwdconv::hip
