// The phase decomposition against brute force: coverage, tap partition,
// empty phases, and dx computed through the phases equal to the definition.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "dispatch/phase.h"
#include "dispatch/phase_stacked.h"
#include "dispatch/scatter.h"

namespace bwdconv {
namespace {

struct Dim1 {
  int64_t input, filter, stride, padding, dilation;
  int64_t output() const { return conv_output_size(input, filter, stride, padding, dilation); }
};

ConvGeometry geometry_of(const std::vector<Dim1>& dims, int64_t extra_input = 0) {
  ConvGeometry g;
  g.spatial_dims = static_cast<int>(dims.size());
  g.batch = 1;
  g.in_channels = g.out_channels = g.filter_in_channels = 1;
  for (int i = 0; i < g.spatial_dims; ++i) {
    g.input[i] = dims[i].input + (i == 0 ? extra_input : 0);
    g.filter[i] = dims[i].filter;
    g.stride[i] = dims[i].stride;
    g.padding[i] = dims[i].padding;
    g.dilation[i] = dims[i].dilation;
  }
  derive_output_sizes(g);
  return g;
}

Dim1 random_dim(std::mt19937& rng) {
  Dim1 d;
  d.filter = 1 + rng() % 5;
  d.stride = 1 + rng() % 4;
  d.dilation = 1 + rng() % 3;
  d.padding = rng() % 4;
  const int64_t min_input = std::max<int64_t>(1, d.dilation * (d.filter - 1) + 1 - 2 * d.padding);
  d.input = min_input + rng() % 9;
  return d;
}

// dx[i] = sum over (o, k) with o*s + k*d - p == i of w[k] * dy[o].
std::vector<int64_t> brute_force_dx(const Dim1& d, const std::vector<int64_t>& w,
                                    const std::vector<int64_t>& dy) {
  std::vector<int64_t> dx(d.input, 0);
  for (int64_t o = 0; o < static_cast<int64_t>(dy.size()); ++o) {
    for (int64_t k = 0; k < d.filter; ++k) {
      const int64_t i = o * d.stride + k * d.dilation - d.padding;
      if (i >= 0 && i < d.input) dx[i] += w[k] * dy[o];
    }
  }
  return dx;
}

std::vector<int64_t> random_values(std::mt19937& rng, int64_t n) {
  std::vector<int64_t> v(n);
  for (auto& x : v) x = static_cast<int64_t>(rng() % 19) - 9;
  return v;
}

int64_t dy_at(const std::vector<int64_t>& dy, int64_t o) {
  return o >= 0 && o < static_cast<int64_t>(dy.size()) ? dy[o] : 0;
}

// dx through the phase plan: each phase's sub-convolution as the plan
// describes it, written to its slots; zeros elsewhere in the phase.
std::vector<int64_t> dx_through_phases(const ConvGeometry& g, const std::vector<Phase>& phases,
                                       const std::vector<int64_t>& w,
                                       const std::vector<int64_t>& dy) {
  std::vector<int64_t> dx(g.input[0], -777);  // every slot must be written
  for (const Phase& phase : phases) {
    const PhaseDim& pd = phase.dims[0];
    for (int64_t q = pd.q_begin; q < pd.q_end; ++q) {
      int64_t value = 0;
      if (!phase.empty() && q < pd.computed_end) {
        for (int64_t j = 0; j < pd.tap_count; ++j) {
          const int64_t k = pd.first_tap + (pd.tap_count - 1 - j) * pd.tap_step;
          value += w[k] * dy_at(dy, q + j * pd.sub_dilation - pd.conv_padding);
        }
      }
      dx[pd.dst_offset + (q - pd.q_begin) * pd.dst_stride] = value;
    }
  }
  return dx;
}

TEST(Phase, DxThroughPhasesEqualsDefinitionFor1dGeometries) {
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 5000; ++trial) {
    const Dim1 d = random_dim(rng);
    const int64_t extra = rng() % d.stride;  // output_padding cases: same O, larger I
    const ConvGeometry g = geometry_of({d}, extra);
    Dim1 actual = d;
    actual.input = g.input[0];
    const auto w = random_values(rng, d.filter);
    const auto dy = random_values(rng, g.output[0]);
    ASSERT_EQ(dx_through_phases(g, enumerate_phases(g), w, dy), brute_force_dx(actual, w, dy))
        << "I " << actual.input << " K " << d.filter << " s " << d.stride << " p " << d.padding
        << " d " << d.dilation;
  }
}

TEST(Phase, PhasesCoverEveryPositionOnceAndTapsPartitionTheFilter) {
  std::mt19937 rng(99);
  for (int trial = 0; trial < 3000; ++trial) {
    const int dims = 1 + rng() % 3;
    std::vector<Dim1> ds;
    for (int i = 0; i < dims; ++i) ds.push_back(random_dim(rng));
    const ConvGeometry g = geometry_of(ds);
    const auto phases = enumerate_phases(g);
    int64_t expected_phases = 1;
    for (int i = 0; i < dims; ++i) expected_phases *= g.stride[i];
    ASSERT_EQ(static_cast<int64_t>(phases.size()), expected_phases);
    for (int i = 0; i < dims; ++i) {
      std::vector<int> position_hits(g.input[i], 0), tap_hits(g.filter[i], 0);
      for (int64_t r = 0; r < g.stride[i]; ++r) {
        const PhaseDim pd = make_phase_dim(g.input[i], g.filter[i], g.output[i], g.stride[i],
                                           g.padding[i], g.dilation[i], r);
        for (int64_t q = 0; q < pd.slots(); ++q) {
          const int64_t pos = pd.dst_offset + q * pd.dst_stride;
          ASSERT_GE(pos, 0);
          ASSERT_LT(pos, g.input[i]);
          ++position_hits[pos];
        }
        // Brute-force taps of phase r: (k*d - r) mod s == 0.
        std::vector<int64_t> taps;
        for (int64_t k = 0; k < g.filter[i]; ++k) {
          if ((k * g.dilation[i] - r) % g.stride[i] == 0) taps.push_back(k);
        }
        ASSERT_EQ(static_cast<int64_t>(taps.size()), pd.tap_count);
        for (int64_t j = 0; j < pd.tap_count; ++j) {
          ASSERT_EQ(taps[j], pd.first_tap + j * pd.tap_step);
          ++tap_hits[taps[j]];
        }
      }
      for (int hits : position_hits) ASSERT_EQ(hits, 1);
      for (int hits : tap_hits) ASSERT_EQ(hits, 1);
    }
    for (const Phase& phase : phases) {
      EXPECT_EQ(phase.empty(), phase.tap_count() == 0);
    }
  }
}

// dx through the scatter plan: correlate the zero-inserted, padded buffer with
// the flipped filter at dilation d.
std::vector<int64_t> dx_through_scatter(const ConvGeometry& g, const std::vector<int64_t>& w,
                                        const std::vector<int64_t>& dy) {
  const ScatterDim sd = make_scatter_geometry(g).dims[0];
  std::vector<int64_t> buffer(sd.buffer, 0);
  for (int64_t o = 0; o < g.output[0]; ++o) {
    const int64_t j = sd.lead + o * g.stride[0];
    if (j >= 0 && j < sd.buffer) buffer[j] = dy[o];
  }
  std::vector<int64_t> dx(g.input[0], 0);
  for (int64_t i = 0; i < g.input[0]; ++i) {
    for (int64_t k = 0; k < g.filter[0]; ++k) {
      dx[i] += w[g.filter[0] - 1 - k] * buffer[i + k * g.dilation[0]];
    }
  }
  return dx;
}

TEST(Scatter, BufferSizeAndDxEqualDefinition) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 5000; ++trial) {
    const Dim1 d = random_dim(rng);
    const ConvGeometry g = geometry_of({d}, rng() % d.stride);
    Dim1 actual = d;
    actual.input = g.input[0];
    const ScatterDim sd = make_scatter_geometry(g).dims[0];
    ASSERT_EQ(sd.buffer - d.dilation * (d.filter - 1), g.input[0]);
    const auto w = random_values(rng, d.filter);
    const auto dy = random_values(rng, g.output[0]);
    ASSERT_EQ(dx_through_scatter(g, w, dy), brute_force_dx(actual, w, dy));
  }
}

// dx through the stacked plan: one padded correlation per stacked phase with
// the common padding, interleaved as E[s*q + r] and cropped as dx[i] = E[i + p].
std::vector<int64_t> dx_through_stacked(const ConvGeometry& g, const std::vector<Phase>& phases,
                                        const std::vector<int64_t>& w,
                                        const std::vector<int64_t>& dy) {
  const StackedGeometry sg = make_stacked_geometry(g, phases);
  const StackedDim& sd = sg.dims[0];
  const int64_t s = g.stride[0];
  std::vector<int64_t> expanded(sd.rows * s, 0);
  for (size_t n = 0; n < sg.stacked_phases.size(); ++n) {
    const PhaseDim& pd = phases[sg.stacked_phases[n]].dims[0];
    std::vector<int64_t> padded_filter(sd.filter, 0);
    for (int64_t j = 0; j < pd.tap_count; ++j) {
      padded_filter[sg.tap_offsets[n][0] + j] =
          w[pd.first_tap + (pd.tap_count - 1 - j) * pd.tap_step];
    }
    for (int64_t q = 0; q < std::min(sd.rows, sd.output); ++q) {
      int64_t value = 0;
      for (int64_t j = 0; j < sd.filter; ++j) {
        value += padded_filter[j] * dy_at(dy, q + j * sd.sub_dilation - sd.padding);
      }
      expanded[q * s + pd.residue] = value;
    }
  }
  std::vector<int64_t> dx(g.input[0]);
  for (int64_t i = 0; i < g.input[0]; ++i) dx[i] = expanded[i + g.padding[0]];
  return dx;
}

TEST(PhaseStacked, DxEqualsDefinitionWheneverItServes) {
  std::mt19937 rng(77);
  int served = 0, refused = 0;
  for (int trial = 0; trial < 5000; ++trial) {
    const Dim1 d = random_dim(rng);
    const ConvGeometry g = geometry_of({d}, rng() % d.stride);
    Dim1 actual = d;
    actual.input = g.input[0];
    const auto phases = enumerate_phases(g);
    if (phase_stacked_refusal(g, phases)) {
      ++refused;
      EXPECT_GT(d.dilation, 1) << "with dilation 1 every phase shares the sub-dilation 1";
      continue;
    }
    ++served;
    const auto w = random_values(rng, d.filter);
    const auto dy = random_values(rng, g.output[0]);
    ASSERT_EQ(dx_through_stacked(g, phases, w, dy), brute_force_dx(actual, w, dy))
        << "I " << actual.input << " K " << d.filter << " s " << d.stride << " p " << d.padding
        << " d " << d.dilation;
  }
  EXPECT_GT(served, 1000);
  EXPECT_GT(refused, 0);
}

// Seed 003's cases.
TEST(Phase, FilterSmallerThanTheStrideHasEmptyPhasesAndNoPhantomSlice) {
  // K=2, s=3: phase r=2 has no tap (ceil((K - r)/s) would be 0, never negative here).
  const ConvGeometry g = geometry_of({{10, 2, 3, 0, 1}});
  const auto phases = enumerate_phases(g);
  ASSERT_EQ(phases.size(), 3u);
  EXPECT_FALSE(phases[0].empty());
  EXPECT_FALSE(phases[1].empty());
  EXPECT_TRUE(phases[2].empty());
  EXPECT_EQ(phases[2].tap_count(), 0);
}

TEST(Phase, FilterOfTwoStrideTwoKeepsTheFirstRow) {
  // The rocMLIR crop bug: K=2, s=2, p=0 dropped dx's first row.
  const ConvGeometry g = geometry_of({{8, 2, 2, 0, 1}});
  const auto phases = enumerate_phases(g);
  ASSERT_EQ(phases.size(), 2u);
  EXPECT_EQ(phases[0].dims[0].dst_offset, 0);
  EXPECT_EQ(phases[0].dims[0].computed(), 4);
  const std::vector<int64_t> w{3, 5}, dy{1, 2, 3, 4};
  EXPECT_EQ(dx_through_phases(g, phases, w, dy), brute_force_dx({8, 2, 2, 0, 1}, w, dy));
}

TEST(Phase, ThreeByThreeStrideTwoHasFourPhases) {
  const ConvGeometry g = geometry_of({{9, 3, 2, 1, 1}, {9, 3, 2, 1, 1}});
  const auto phases = enumerate_phases(g);
  ASSERT_EQ(phases.size(), 4u);
  const int64_t expected_taps[4][2] = {{2, 2}, {2, 1}, {1, 2}, {1, 1}};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(phases[i].dims[0].tap_count, expected_taps[i][0]);
    EXPECT_EQ(phases[i].dims[1].tap_count, expected_taps[i][1]);
  }
}

TEST(Phase, OneByOneStrideTwoHasOneNonEmptyPhase) {
  const ConvGeometry g = geometry_of({{8, 1, 2, 0, 1}, {8, 1, 2, 0, 1}});
  const auto phases = enumerate_phases(g);
  ASSERT_EQ(phases.size(), 4u);
  EXPECT_FALSE(phases[0].empty());
  for (int i = 1; i < 4; ++i) EXPECT_TRUE(phases[i].empty());
}

TEST(Phase, InputShorterThanTheStrideLeavesPhasesWithoutSlots) {
  // I=2 with stride 4 and padding 0: phases 2 and 3 own no dx position.
  const ConvGeometry g = geometry_of({{2, 1, 4, 0, 1}});
  const auto phases = enumerate_phases(g);
  EXPECT_FALSE(phases[1].has_no_slots());
  EXPECT_TRUE(phases[2].has_no_slots());
  EXPECT_TRUE(phases[3].has_no_slots());
}

}  // namespace
}  // namespace bwdconv
