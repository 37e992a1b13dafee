// The interleave kernel (on the host grid) against the planner's phase
// decomposition: every dx element holds what the phase slot that the PhaseDim
// fields say owns it holds, split across launches, with Keep sources and
// grouped channel maps; and the walk make_interleave_walk builds.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "dispatch/phase.h"
#include "hip/interleave.h"
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

// One interleave problem: dx of a geometry, one result per phase whose
// element at offset k holds 1000 * (phase + 1) + k.
struct Problem {
  ConvGeometry g;
  std::vector<Phase> phases;
  std::vector<PhaseResult> sources;
  std::vector<std::vector<int64_t>> values;
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
  pb.values.resize(pb.phases.size());
  for (size_t r = 0; r < pb.phases.size(); ++r) {
    const Phase& phase = pb.phases[r];
    PhaseResult source;
    if (phase_is_empty(phase)) {
      source.write = PhaseWrite::Zero;
    } else {
      source.write = PhaseWrite::Copy;
      std::vector<int64_t> sizes{g.batch, g.in_channels};
      for (int i = 0; i < g.spatial_dims; ++i) sizes.push_back(phase.dims[i].conv_output);
      const auto strides = contiguous_strides(sizes);
      std::copy(sizes.begin(), sizes.end(), source.sizes);
      std::copy(strides.begin(), strides.end(), source.strides);
    }
    pb.sources.push_back(source);
  }
  return pb;
}

// Fills each Copy result's values, large enough for `group_stride`.
void fill_values(Problem& pb) {
  for (size_t r = 0; r < pb.sources.size(); ++r) {
    PhaseResult& source = pb.sources[r];
    if (source.write != PhaseWrite::Copy) continue;
    int64_t last = 0;
    for (int d = 0; d < pb.g.spatial_dims + 2; ++d) {
      last += std::max<int64_t>(source.sizes[d] - 1, 0) * source.strides[d];
    }
    const int64_t groups = pb.dx_sizes[1] / pb.channels_per_group;
    last += (groups - 1) * pb.group_stride;
    pb.values[r].resize(last + 1);
    for (int64_t k = 0; k <= last; ++k) pb.values[r][k] = 1000 * static_cast<int64_t>(r + 1) + k;
    source.data = pb.values[r].data();
  }
}

// Random geometries whose phases fit one launch when `one_launch`.
Problem random_problem(std::mt19937& rng, bool one_launch) {
  for (;;) {
    const ConvGeometry g = random_geometry(rng);
    Problem pb = make_problem(g);
    if (!one_launch || pb.phases.size() <= static_cast<size_t>(kMaxPhasesPerLaunch)) return pb;
  }
}

// The walk of phases [first, first + count) over dx.
InterleaveParams launch_params(const Problem& pb, int64_t* dx, int first, int count) {
  InterleaveLaunch l;
  l.dst = dx;
  l.dst_view.dims = static_cast<int>(pb.dx_sizes.size());
  const auto strides = contiguous_strides(pb.dx_sizes);
  for (int d = 0; d < l.dst_view.dims; ++d) {
    l.dst_view.sizes[d] = pb.dx_sizes[d];
    l.dst_view.strides[d] = strides[d];
  }
  for (int i = 0; i < pb.g.spatial_dims; ++i) {
    l.stride[i] = pb.g.stride[i];
    l.padding[i] = pb.g.padding[i];
  }
  l.channels_per_group = pb.channels_per_group;
  l.group_stride = pb.group_stride;
  l.first_phase = first;
  l.phase_count = count;
  l.element_bytes = sizeof(int64_t);
  for (int e = 0; e < count; ++e) l.phases[e] = pb.sources[first + e];
  InterleaveParams p;
  EXPECT_TRUE(make_interleave_walk(l, &p));
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

// Runs the launches on dx (filled with -1 first): every element holds its
// owner's value (the result at the owner's slot, or 0 past the result or for
// an empty phase), or -1 where its owner is kept.
void check_launches(Problem pb, const std::vector<Launch>& launches) {
  fill_values(pb);
  const Reference ref = reference_owners(pb.g, pb.phases);
  ASSERT_EQ(ref.strays, 0);
  for (const Owner& owner : ref.owners) ASSERT_EQ(owner.hits, 1);
  int64_t elements = 1;
  for (const int64_t size : pb.dx_sizes) elements *= size;
  std::vector<int64_t> dx(elements, -1);
  for (const Launch& l : launches) {
    const InterleaveParams p = launch_params(pb, dx.data(), l.first, l.count);
    ASSERT_EQ(launch_interleave<Target::host>(p, nullptr), nullptr);
  }
  const std::vector<int64_t> zero(pb.dx_sizes.size(), 0);
  std::vector<int64_t> coords = zero;
  int64_t linear = 0;
  do {
    int64_t flat = 0;
    for (int i = 0; i < pb.g.spatial_dims; ++i) flat = flat * pb.g.input[i] + coords[i + 2];
    const Owner& owner = ref.owners[flat];
    const PhaseResult& source = pb.sources[owner.phase];
    const int64_t n = coords[0], c = coords[1];
    int64_t expected = source.write == PhaseWrite::Keep ? -1 : 0;
    if (source.write == PhaseWrite::Copy && owner.copy) {
      int64_t offset = n * source.strides[0] + (c / pb.channels_per_group) * pb.group_stride +
                       (c % pb.channels_per_group) * source.strides[1];
      for (int i = 0; i < pb.g.spatial_dims; ++i) offset += owner.q[i] * source.strides[i + 2];
      expected = pb.values[owner.phase][offset];
    }
    ASSERT_EQ(dx[linear], expected) << describe(pb.g, coords);
    ++linear;
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
    for (PhaseResult& source : pb.sources) {
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

// A launch over dx of `sizes` and element `strides` (logical order).
InterleaveLaunch launch_over(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides,
                             int element_bytes) {
  InterleaveLaunch l;
  l.dst_view.dims = static_cast<int>(sizes.size());
  std::copy(sizes.begin(), sizes.end(), l.dst_view.sizes);
  std::copy(strides.begin(), strides.end(), l.dst_view.strides);
  l.element_bytes = element_bytes;
  return l;
}

// Phase e copies from a result of `sizes` and `strides` at data.
void copy_phase(InterleaveLaunch& l, int e, const void* data, const std::vector<int64_t>& sizes,
                const std::vector<int64_t>& strides) {
  PhaseResult& r = l.phases[e];
  r.write = PhaseWrite::Copy;
  r.data = data;
  std::copy(sizes.begin(), sizes.end(), r.sizes);
  std::copy(strides.begin(), strides.end(), r.strides);
}

// Worked by hand: I = 5, K = 3, s = 2, p = 1, so dx[i] is slot (i + 1) / 2 of
// phase (i + 1) % 2; phase 0 has two computed slots, phase 1 has three.
TEST(InterleaveIndex, OneDimStrideTwoByHand) {
  InterleaveLaunch l = launch_over({1, 1, 5}, {5, 5, 1}, 4);
  l.stride[0] = 2;
  l.padding[0] = 1;
  l.channels_per_group = 1;
  l.phase_count = 2;
  const std::vector<float> results[2] = {{10, 11}, {20, 21, 22}};
  for (int e = 0; e < 2; ++e) {
    copy_phase(l, e, results[e].data(), {1, 1, static_cast<int64_t>(results[e].size())}, {1, 1, 1});
  }
  std::vector<float> dx(5, -1.0f);
  l.dst = dx.data();
  InterleaveParams p;
  ASSERT_TRUE(make_interleave_walk(l, &p));
  ASSERT_EQ(launch_interleave<Target::host>(p, nullptr), nullptr);
  EXPECT_EQ(dx, (std::vector<float>{20, 11, 21, 0, 22}));
}

// NCHW: batch and channels merge into one outer dim, rows of W at the
// convolution's stride; the phases' row strides and extents as the results have them.
TEST(InterleaveWalk, NchwMergesBatchAndChannelsAndWalksRowsOfW) {
  InterleaveLaunch l = launch_over({2, 3, 9, 11}, {297, 99, 11, 1}, 2);
  l.stride[0] = l.stride[1] = 2;
  l.padding[0] = l.padding[1] = 1;
  l.channels_per_group = 3;
  l.phase_count = 4;
  const uint16_t data[1] = {};
  for (int e = 0; e < 4; ++e) copy_phase(l, e, data, {2, 3, 5, 6}, {90, 30, 6, 1});
  InterleaveParams p;
  ASSERT_TRUE(make_interleave_walk(l, &p));
  EXPECT_EQ(p.outer_dims, 2);  // [N*C, H]
  EXPECT_EQ(p.outer[0].size.value, 6u);
  EXPECT_EQ(p.outer[1].size.value, 9u);
  EXPECT_EQ(p.outer[1].step.value, 2u);
  EXPECT_EQ(p.outer[1].phase_weight, 2);
  EXPECT_EQ(p.row.size.value, 11u);
  EXPECT_EQ(p.row.step.value, 2u);
  EXPECT_EQ(p.row.phase_weight, 1);
  EXPECT_EQ(p.rows, 54);
  EXPECT_EQ(p.walk.chunks_per_row, 3);  // (11 + 7) / 8 rounded up
  EXPECT_EQ(p.phases[0].strides[0], 30);
  EXPECT_EQ(p.phases[0].extent[1], 5);  // (9 - 1 + 1) / 2 + 1 slots, the result has 5
  EXPECT_EQ(p.phases[0].row_stride, 1);
  EXPECT_EQ(p.phases[0].row_extent, 6);
  EXPECT_FALSE(p.wide_offsets);
  EXPECT_TRUE(p.dense);  // rows back to back: the dense walk
  // A gap after each row of W leaves the row walk.
  l.dst_view.strides[0] = 2 * 3 * 9 * 12;
  l.dst_view.strides[1] = 9 * 12;
  l.dst_view.strides[2] = 12;
  ASSERT_TRUE(make_interleave_walk(l, &p));
  EXPECT_FALSE(p.dense);
  EXPECT_EQ(p.rows, 54);
}

// channels_last with groups that phase_stacked keeps apart: rows of the
// channels of a group, the groups an outer dim innermost.
TEST(InterleaveWalk, ChannelsLastStackedGroupsWalkRowsOfAGroupsChannels) {
  // [2, 3 groups x 8, 5, 4] channels_last
  InterleaveLaunch l = launch_over({2, 24, 5, 4}, {480, 1, 96, 24}, 4);
  l.stride[0] = l.stride[1] = 2;
  l.channels_per_group = 8;
  l.phase_count = 4;
  // stacked result [2, 3 groups x 4 phases x 8, 3, 2] channels_last
  l.group_stride = 32;
  const float data[1] = {};
  for (int e = 0; e < 4; ++e) copy_phase(l, e, data, {2, 96, 3, 2}, {576, 1, 192, 96});
  InterleaveParams p;
  ASSERT_TRUE(make_interleave_walk(l, &p));
  EXPECT_EQ(p.outer_dims, 4);  // [N, H, W, groups]
  EXPECT_EQ(p.outer[3].size.value, 3u);
  EXPECT_EQ(p.outer[3].dst_stride, 8);
  EXPECT_EQ(p.phases[2].strides[3], 32);
  EXPECT_EQ(p.row.size.value, 8u);
  EXPECT_EQ(p.row.step.value, 1u);
  EXPECT_EQ(p.row.phase_weight, 0);
  EXPECT_TRUE(p.dense);  // groups, then W, H and N, each spanning the dims inside it
}

// The kernel takes the outermost dim as plain: with a batch of one (folded)
// channels_last leaves H outermost, so a plain size-1 dim goes first.
TEST(InterleaveWalk, PutsAPlainDimFirstWhereTheOutermostIsSpatial) {
  InterleaveLaunch l = launch_over({1, 8, 5, 4}, {160, 1, 32, 8}, 4);
  l.stride[0] = l.stride[1] = 2;
  l.channels_per_group = 8;
  l.phase_count = 4;
  const float data[1] = {};
  for (int e = 0; e < 4; ++e) copy_phase(l, e, data, {1, 8, 3, 2}, {48, 1, 16, 8});
  InterleaveParams p;
  ASSERT_TRUE(make_interleave_walk(l, &p));
  EXPECT_EQ(p.outer_dims, 3);  // [1, H, W]
  EXPECT_EQ(p.outer[0].size.value, 1u);
  EXPECT_EQ(p.outer[0].step.value, 1u);
  EXPECT_EQ(p.outer[0].phase_weight, 0);
  EXPECT_EQ(p.phases[0].extent[0], 1);
  EXPECT_EQ(p.outer[1].size.value, 5u);
  EXPECT_EQ(p.outer[1].step.value, 2u);
  EXPECT_EQ(p.row.size.value, 8u);
  EXPECT_EQ(p.rows, 20);
  EXPECT_TRUE(p.dense);
}

// A size-1 dim is folded into the phases: its residue moves the first
// phase, its slot the data, a slot past a result makes the phase a zero.
TEST(InterleaveWalk, FoldsSizeOneDimsIntoThePhases) {
  InterleaveLaunch l = launch_over({1, 4, 1, 16}, {64, 16, 16, 1}, 8);
  l.stride[0] = 2;
  l.stride[1] = 2;
  l.padding[0] = 3;  // position 0 of H: slot 1, residue 1 (phases 2 and 3)
  l.channels_per_group = 4;
  l.phase_count = 4;
  const double data[64] = {};
  for (int e = 0; e < 4; ++e) copy_phase(l, e, data, {1, 4, 1 + e % 2, 8}, {32, 8, 8, 1});
  InterleaveParams p;
  ASSERT_TRUE(make_interleave_walk(l, &p));
  EXPECT_EQ(p.outer_dims, 1);  // [C]
  EXPECT_EQ(p.first_phase, -2);
  EXPECT_EQ(p.phases[2].write, PhaseWrite::Zero);  // one slot only
  EXPECT_EQ(p.phases[3].write, PhaseWrite::Copy);
  EXPECT_EQ(p.phases[3].data, static_cast<const void*>(data + 8));
}

TEST(InterleaveWalk, RefusesPositionsPast2To31) {
  const int64_t row = int64_t{1} << 30;
  InterleaveLaunch l = launch_over({1, 1, row}, {row, row, 1}, 4);
  l.channels_per_group = 1;
  l.phase_count = 1;
  InterleaveParams p;
  EXPECT_FALSE(make_interleave_walk(l, &p));
}

}  // namespace
}  // namespace bwdconv::hip
