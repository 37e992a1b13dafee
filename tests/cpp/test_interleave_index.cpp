// interleave_source against the planner's phase decomposition: for every dx
// element, the phase slot that the PhaseDim fields say owns it, split across
// launches, with Keep sources and grouped channel maps.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "dispatch/phase.h"
#include "hip/interleave_index.h"
#include "hip/layout.h"

namespace bwdconv::hip {
namespace {

// Moves `index` to the next point of the box [begin, end) (last entry
// fastest); false after the last point.
bool next_index(std::vector<int64_t>& index, const std::vector<int64_t>& begin,
                const std::vector<int64_t>& end) {
  for (int k = static_cast<int>(index.size()) - 1; k >= 0; --k) {
    if (++index[k] < end[k]) return true;
    index[k] = begin[k];
  }
  return false;
}

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> strides(sizes.size());
  int64_t stride = 1;
  for (int d = static_cast<int>(sizes.size()) - 1; d >= 0; --d) {
    strides[d] = stride;
    stride *= sizes[d];
  }
  return strides;
}

ConvGeometry random_geometry(std::mt19937& rng) {
  ConvGeometry g;
  g.spatial_dims = 1 + rng() % 3;
  g.batch = 1 + rng() % 2;
  g.in_channels = g.out_channels = g.filter_in_channels = 1 + rng() % 2;
  for (int i = 0; i < g.spatial_dims; ++i) {
    g.filter[i] = 1 + rng() % 5;
    g.stride[i] = 1 + rng() % 4;
    g.dilation[i] = 1 + rng() % 3;
    g.padding[i] = rng() % 4;
    const int64_t min_input = std::max<int64_t>(1, g.dilated_filter(i) - 2 * g.padding[i]);
    g.input[i] = min_input + rng() % 6;
  }
  derive_output_sizes(g);
  return g;
}

// Who owns dx spatial position i (row-major over the input sizes), from the
// PhaseDim fields alone: phase `phase`, slot `q`, copied or zero.
struct Owner {
  int64_t phase = -1;
  std::vector<int64_t> q;
  bool copy = false;
  int hits = 0;
};

struct Reference {
  std::vector<Owner> owners;
  int64_t strays = 0;  // slots outside dx
};

bool phase_is_empty(const Phase& phase) {
  for (int i = 0; i < phase.spatial_dims; ++i) {
    if (phase.dims[i].tap_count == 0) return true;
  }
  return false;
}

Reference reference_owners(const ConvGeometry& g, const std::vector<Phase>& phases) {
  const int dims = g.spatial_dims;
  int64_t positions = 1;
  for (int i = 0; i < dims; ++i) positions *= g.input[i];
  Reference ref;
  ref.owners.resize(positions);
  for (size_t r = 0; r < phases.size(); ++r) {
    const Phase& phase = phases[r];
    std::vector<int64_t> begin(dims), end(dims);
    bool has_slots = true;
    for (int i = 0; i < dims; ++i) {
      begin[i] = phase.dims[i].q_begin;
      end[i] = phase.dims[i].q_end;
      has_slots = has_slots && end[i] > begin[i];
    }
    if (!has_slots) continue;
    std::vector<int64_t> q = begin;
    do {
      int64_t flat = 0;
      bool inside = true, copy = !phase_is_empty(phase);
      for (int i = 0; i < dims; ++i) {
        const PhaseDim& pd = phase.dims[i];
        const int64_t position = pd.dst_offset + (q[i] - pd.q_begin) * pd.dst_stride;
        inside = inside && position >= 0 && position < g.input[i];
        flat = flat * g.input[i] + position;
        copy = copy && q[i] < pd.conv_output;
      }
      if (!inside) {
        ++ref.strays;
        continue;
      }
      Owner& owner = ref.owners[flat];
      owner.phase = static_cast<int64_t>(r);
      owner.q = q;
      owner.copy = copy;
      ++owner.hits;
    } while (next_index(q, begin, end));
  }
  return ref;
}

// One interleave problem: dx of a geometry, one virtual source per phase.
struct Problem {
  ConvGeometry g;
  std::vector<Phase> phases;
  std::vector<PhaseSource> sources;
  std::vector<int64_t> dx_sizes;  // [N, C, input...]
  int64_t channels_per_group = 1;
  int64_t group_stride = 0;
};

// Copy sources for non-empty phases ([N, C, conv_output...] contiguous), Zero
// for empty ones; ungrouped channels.
Problem make_problem(const ConvGeometry& g) {
  Problem pb;
  pb.g = g;
  pb.phases = enumerate_phases(g);
  pb.dx_sizes = {g.batch, g.in_channels};
  for (int i = 0; i < g.spatial_dims; ++i) pb.dx_sizes.push_back(g.input[i]);
  pb.channels_per_group = g.in_channels;
  for (const Phase& phase : pb.phases) {
    PhaseSource source;
    if (phase_is_empty(phase)) {
      source.write = PhaseWrite::Zero;
    } else {
      source.write = PhaseWrite::Copy;
      std::vector<int64_t> sizes{g.batch, g.in_channels};
      for (int i = 0; i < g.spatial_dims; ++i) {
        source.extent[i] = phase.dims[i].conv_output;
        sizes.push_back(phase.dims[i].conv_output);
      }
      const auto strides = contiguous_strides(sizes);
      std::copy(strides.begin(), strides.end(), source.strides);
    }
    pb.sources.push_back(source);
  }
  return pb;
}

// Random geometries whose phases fit one launch when `one_launch`.
Problem random_problem(std::mt19937& rng, bool one_launch) {
  for (;;) {
    const ConvGeometry g = random_geometry(rng);
    Problem pb = make_problem(g);
    if (!one_launch || pb.phases.size() <= static_cast<size_t>(kMaxPhasesPerLaunch)) return pb;
  }
}

InterleaveParams launch_params(const Problem& pb, int first, int count) {
  InterleaveParams p;
  p.dst_view.dims = static_cast<int>(pb.dx_sizes.size());
  const auto strides = contiguous_strides(pb.dx_sizes);
  for (int d = 0; d < p.dst_view.dims; ++d) {
    p.dst_view.sizes[d] = pb.dx_sizes[d];
    p.dst_view.strides[d] = strides[d];
  }
  for (int i = 0; i < pb.g.spatial_dims; ++i) {
    p.stride[i] = make_step(pb.g.stride[i]);
    p.padding[i] = pb.g.padding[i];
  }
  p.channels_per_group = make_step(pb.channels_per_group);
  p.group_stride = pb.group_stride;
  p.first_phase = first;
  p.phase_count = count;
  for (int e = 0; e < count; ++e) p.phases[e] = pb.sources[first + e];
  return p;
}

struct Launch {
  int first, count;
};

std::string describe(const ConvGeometry& g, const std::vector<int64_t>& coords) {
  std::string text = "coords";
  for (const int64_t c : coords) text += " " + std::to_string(c);
  text += " | I/K/s/p/d";
  for (int i = 0; i < g.spatial_dims; ++i) {
    text += " " + std::to_string(g.input[i]) + "/" + std::to_string(g.filter[i]) + "/" +
            std::to_string(g.stride[i]) + "/" + std::to_string(g.padding[i]) + "/" +
            std::to_string(g.dilation[i]);
  }
  return text;
}

// interleave_source with narrow and with 64-bit division, which must agree.
InterleaveSource source_of(const InterleaveParams& p, const int64_t* coords) {
  const InterleaveSource narrow = interleave_source<int32_t>(p, coords);
  const InterleaveSource wide = interleave_source<int64_t>(p, coords);
  EXPECT_EQ(narrow.write, wide.write);
  EXPECT_EQ(narrow.entry, wide.entry);
  EXPECT_EQ(narrow.offset, wide.offset);
  return narrow;
}

// Every dx element: the launch that carries its owner's phase gives the
// source's verdict (Copy at the expected offset, Zero, or Keep); every other
// launch gives Keep.
void check_launches(const Problem& pb, const std::vector<Launch>& launches) {
  const Reference ref = reference_owners(pb.g, pb.phases);
  ASSERT_EQ(ref.strays, 0);
  for (const Owner& owner : ref.owners) ASSERT_EQ(owner.hits, 1);
  std::vector<InterleaveParams> params;
  for (const Launch& l : launches) params.push_back(launch_params(pb, l.first, l.count));
  const std::vector<int64_t> zero(pb.dx_sizes.size(), 0);
  std::vector<int64_t> coords = zero;
  do {
    int64_t flat = 0;
    for (int i = 0; i < pb.g.spatial_dims; ++i) flat = flat * pb.g.input[i] + coords[i + 2];
    const Owner& owner = ref.owners[flat];
    const PhaseSource& source = pb.sources[owner.phase];
    const int64_t n = coords[0], c = coords[1];
    int64_t offset = n * source.strides[0] + (c / pb.channels_per_group) * pb.group_stride +
                     (c % pb.channels_per_group) * source.strides[1];
    for (int i = 0; i < pb.g.spatial_dims; ++i) offset += owner.q[i] * source.strides[i + 2];
    int writers = 0;
    for (size_t l = 0; l < launches.size(); ++l) {
      const InterleaveSource actual = source_of(params[l], coords.data());
      const bool carried = owner.phase >= launches[l].first &&
                           owner.phase < launches[l].first + launches[l].count;
      PhaseWrite expected = PhaseWrite::Keep;
      if (carried) expected = source.write == PhaseWrite::Copy && !owner.copy ? PhaseWrite::Zero
                                                                              : source.write;
      ASSERT_EQ(actual.write, expected) << "launch " << l << " " << describe(pb.g, coords);
      writers += actual.write != PhaseWrite::Keep;
      if (expected != PhaseWrite::Copy) continue;
      ASSERT_EQ(actual.entry, owner.phase - launches[l].first) << describe(pb.g, coords);
      ASSERT_EQ(actual.offset, offset) << describe(pb.g, coords);
    }
    ASSERT_EQ(writers, source.write == PhaseWrite::Keep ? 0 : 1) << describe(pb.g, coords);
  } while (next_index(coords, zero, pb.dx_sizes));
}

int phase_count(const Problem& pb) { return static_cast<int>(pb.phases.size()); }

TEST(InterleaveIndex, OneLaunchMatchesThePhaseSlots) {
  std::mt19937 rng(2024);
  for (int trial = 0; trial < 3000; ++trial) {
    const Problem pb = random_problem(rng, true);
    ASSERT_NO_FATAL_FAILURE(check_launches(pb, {{0, phase_count(pb)}})) << "trial " << trial;
  }
}

TEST(InterleaveIndex, TwoLaunchesEachWriteOnlyTheirPhases) {
  std::mt19937 rng(4048);
  int both_busy = 0;
  for (int trial = 0; trial < 1500; ++trial) {
    const Problem pb = random_problem(rng, false);
    const int total = phase_count(pb);
    // Both launches within kMaxPhasesPerLaunch (total is at most 4^3 = 64).
    const int low = std::max(0, total - kMaxPhasesPerLaunch);
    const int high = std::min(total, kMaxPhasesPerLaunch);
    const int split = low + static_cast<int>(rng() % (high - low + 1));
    both_busy += split > 0 && split < total;
    ASSERT_NO_FATAL_FAILURE(check_launches(pb, {{0, split}, {split, total - split}}))
        << "trial " << trial << " split " << split << " of " << total;
  }
  EXPECT_GT(both_busy, 500);
}

TEST(InterleaveIndex, KeepSourcesAreLeftAlone) {
  std::mt19937 rng(77);
  for (int trial = 0; trial < 1000; ++trial) {
    Problem pb = random_problem(rng, true);
    for (PhaseSource& source : pb.sources) {
      if (rng() % 2) source.write = PhaseWrite::Keep;
    }
    ASSERT_NO_FATAL_FAILURE(check_launches(pb, {{0, phase_count(pb)}})) << "trial " << trial;
  }
}

TEST(InterleaveIndex, GroupedChannelsMapThroughTheGroupStride) {
  std::mt19937 rng(31);
  for (int trial = 0; trial < 1000; ++trial) {
    ConvGeometry g = random_geometry(rng);
    const int64_t groups = 1 + rng() % 3, per_group = 1 + rng() % 3;
    g.in_channels = g.out_channels = groups * per_group;
    g.groups = groups;
    g.filter_in_channels = per_group;
    Problem pb = make_problem(g);
    if (phase_count(pb) > kMaxPhasesPerLaunch) continue;
    pb.channels_per_group = per_group;
    pb.group_stride = static_cast<int64_t>(rng() % 50);
    ASSERT_NO_FATAL_FAILURE(check_launches(pb, {{0, phase_count(pb)}})) << "trial " << trial;
  }
}

// Worked by hand: I = 5, K = 3, s = 2, p = 1, so dx[i] is slot (i + 1) / 2 of
// phase (i + 1) % 2; phase 0 has two computed slots, phase 1 has three.
TEST(InterleaveIndex, OneDimStrideTwoByHand) {
  InterleaveParams p;
  p.dst_view.dims = 3;
  const int64_t sizes[3] = {1, 1, 5}, strides[3] = {5, 5, 1};
  std::copy(sizes, sizes + 3, p.dst_view.sizes);
  std::copy(strides, strides + 3, p.dst_view.strides);
  p.stride[0] = make_step(2);
  p.padding[0] = 1;
  p.channels_per_group = make_step(1);
  p.phase_count = 2;
  for (int e = 0; e < 2; ++e) {
    p.phases[e].write = PhaseWrite::Copy;
    p.phases[e].strides[2] = 10;
    p.phases[e].extent[0] = 2 + e;
  }
  const PhaseWrite write[5] = {PhaseWrite::Copy, PhaseWrite::Copy, PhaseWrite::Copy,
                               PhaseWrite::Zero, PhaseWrite::Copy};
  const int entry[5] = {1, 0, 1, 0, 1};
  const int64_t offset[5] = {0, 10, 10, 0, 20};
  for (int64_t i = 0; i < 5; ++i) {
    const int64_t coords[3] = {0, 0, i};
    const InterleaveSource source = source_of(p, coords);
    EXPECT_EQ(source.write, write[i]) << i;
    if (write[i] != PhaseWrite::Copy) continue;
    EXPECT_EQ(source.entry, entry[i]) << i;
    EXPECT_EQ(source.offset, offset[i]) << i;
  }
}

TEST(InterleaveIndex, NarrowOnlyWhileCoordinatePlusPaddingFits) {
  InterleaveParams p;
  p.dst_view.dims = 3;
  const int64_t sizes[3] = {4, 8, 1000};
  std::copy(sizes, sizes + 3, p.dst_view.sizes);
  p.stride[0] = make_step(3);
  p.padding[0] = kNarrowLimit - 1001;  // size + p = 2^31 - 1
  EXPECT_TRUE(interleave_divides_narrow(p));
  p.padding[0] = kNarrowLimit - 1000;  // size + p = 2^31
  EXPECT_FALSE(interleave_divides_narrow(p));
}

}  // namespace
}  // namespace bwdconv::hip
