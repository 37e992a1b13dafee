#include <gtest/gtest.h>

#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "dispatch/plan.h"
#include "dispatch/swap1x1.h"

namespace bwdconv {
namespace {

// A channels_last 1x1 convolution without padding (the in_place writer's
// domain), with `dims` spatial dims (0: 1-3 at random).
ConvGeometry one_by_one(std::mt19937& rng, int dims = 0) {
  ConvGeometry g;
  g.device = DeviceKind::CUDA;
  g.layout = MemoryLayout::ChannelsLast;
  g.spatial_dims = dims > 0 ? dims : 1 + static_cast<int>(rng() % 3);
  g.batch = 1 + rng() % 3;
  g.in_channels = 1 + rng() % 4;
  g.out_channels = 1 + rng() % 4;
  g.filter_in_channels = g.in_channels;
  for (int i = 0; i < g.spatial_dims; ++i) {
    g.stride[i] = 1 + rng() % 3;
    g.input[i] = 1 + rng() % 7;
    g.filter[i] = 1;
    g.dilation[i] = 1;
  }
  derive_output_sizes(g);
  return g;
}

// Offsets of dx's slots dx[n, s*o] in channels_last dx, row-major over (n, o).
std::vector<int64_t> slot_offsets(const ConvGeometry& g) {
  std::vector<int64_t> strides(g.spatial_dims);
  int64_t step = g.in_channels;
  for (int i = g.spatial_dims - 1; i >= 0; --i) {
    strides[i] = step;
    step *= g.input[i];
  }
  std::vector<int64_t> offsets{0};
  for (int64_t n = 1; n < g.batch; ++n) offsets.push_back(n * step);
  for (int i = 0; i < g.spatial_dims; ++i) {
    std::vector<int64_t> next;
    for (int64_t base : offsets) {
      for (int64_t o = 0; o < g.output[i]; ++o) next.push_back(base + o * g.stride[i] * strides[i]);
    }
    offsets = next;
  }
  return offsets;
}

// Whether the slots are batches of [O_last, C] rows that one strided batched
// GEMM can write: offset = b * batch_stride + row * s_last * C.
bool one_strided_batch(const ConvGeometry& g, const std::vector<int64_t>& offsets,
                       int64_t batch_stride) {
  const int last = g.spatial_dims - 1;
  const int64_t rows = g.output[last], row_stride = g.stride[last] * g.in_channels;
  for (size_t k = 0; k < offsets.size(); ++k) {
    const int64_t b = static_cast<int64_t>(k) / rows, row = static_cast<int64_t>(k) % rows;
    if (offsets[k] != b * batch_stride + row * row_stride) return false;
  }
  return true;
}

TEST(Swap1x1, InPlaceServesExactlyTheUniformlyStridedSlots) {
  std::mt19937 rng(7);
  int served = 0, refused = 0;
  for (int trial = 0; trial < 4000; ++trial) {
    const ConvGeometry g = one_by_one(rng);
    const auto offsets = slot_offsets(g);
    const bool refuses = in_place_refusal(g).has_value();
    // With a single batch row every stride "works"; otherwise the rows' spacing is fixed.
    const int64_t batch_rows = static_cast<int64_t>(offsets.size()) / g.output[g.spatial_dims - 1];
    if (!refuses) {
      ++served;
      EXPECT_TRUE(one_strided_batch(g, offsets, in_place_batch_stride(g)))
          << format_sizes(g.input, g.spatial_dims) << " stride "
          << format_sizes(g.stride, g.spatial_dims);
    } else if (batch_rows > 1) {
      ++refused;
      const int64_t spacing = offsets[g.output[g.spatial_dims - 1]] - offsets[0];
      EXPECT_FALSE(one_strided_batch(g, offsets, spacing))
          << format_sizes(g.input, g.spatial_dims) << " stride "
          << format_sizes(g.stride, g.spatial_dims);
    }
  }
  EXPECT_GT(served, 100);
  EXPECT_GT(refused, 100);
}

TEST(Swap1x1, InPlaceNeedsChannelsLastOneGroupAndNoPadding) {
  std::mt19937 rng(3);
  ConvGeometry g = one_by_one(rng, 1);
  g.input[0] = 8;
  g.stride[0] = 2;
  derive_output_sizes(g);
  ASSERT_FALSE(in_place_refusal(g).has_value());
  ConvGeometry contiguous = g, padded = g, grouped = g;
  contiguous.layout = MemoryLayout::Contiguous;
  padded.padding[0] = 1;
  derive_output_sizes(padded);
  grouped.in_channels = grouped.out_channels = 4;
  grouped.groups = 2;
  grouped.filter_in_channels = 2;
  for (const ConvGeometry& refused : {contiguous, padded, grouped}) {
    EXPECT_TRUE(in_place_refusal(refused).has_value());
    EXPECT_EQ(choose_swap1x1_writer(refused).writer, Swap1x1Writer::fused);
    EXPECT_EQ(writer_refusal(Swap1x1Writer::in_place, refused), in_place_refusal(refused));
    // in_place forced where it cannot serve: fused, saying why; strict: throws.
    const Swap1x1Choice gave_way = choose_swap1x1_writer(refused, Swap1x1Writer::in_place);
    EXPECT_EQ(gave_way.writer, Swap1x1Writer::fused);
    EXPECT_NE(gave_way.reason.find("forced in_place cannot serve it: " + *in_place_refusal(refused)),
              std::string::npos) << gave_way.reason;
    EXPECT_THROW(choose_swap1x1_writer(refused, Swap1x1Writer::in_place, /*strict=*/true),
                 std::invalid_argument);
  }
  // On a GPU in_place, unless a channel row is narrower than a 32-byte sector.
  g.in_channels = g.filter_in_channels = 8;
  EXPECT_EQ(choose_swap1x1_writer(g).writer, Swap1x1Writer::in_place);
  EXPECT_FALSE(writer_refusal(Swap1x1Writer::in_place, g).has_value());
  ConvGeometry narrow = g, half = g;
  narrow.in_channels = narrow.filter_in_channels = 7;
  half.dtype = DType::BFloat16;
  for (const ConvGeometry& shared : {narrow, half}) {
    const Swap1x1Choice choice = choose_swap1x1_writer(shared);
    EXPECT_EQ(choice.writer, Swap1x1Writer::fused);
    EXPECT_NE(choice.reason.find("narrower than a 32-byte sector"), std::string::npos)
        << choice.reason;
    EXPECT_EQ(choose_swap1x1_writer(shared, Swap1x1Writer::in_place).writer,
              Swap1x1Writer::in_place);
  }
  half.in_channels = half.filter_in_channels = 16;
  EXPECT_EQ(choose_swap1x1_writer(half).writer, Swap1x1Writer::in_place);
  ConvGeometry on_cpu = g;
  on_cpu.device = DeviceKind::CPU;
  EXPECT_EQ(choose_swap1x1_writer(on_cpu).writer, Swap1x1Writer::fused);
  EXPECT_EQ(choose_swap1x1_writer(on_cpu, Swap1x1Writer::in_place).writer,
            Swap1x1Writer::in_place);
}

// Whether every dx position of one dim receives at most one tap, by brute
// force over (o, k): the positions o*s + k*d - p.
bool taps_never_overlap(int64_t input, int64_t filter, int64_t stride, int64_t padding,
                        int64_t dilation) {
  const int64_t output = conv_output_size(input, filter, stride, padding, dilation);
  std::vector<int> hits(input, 0);
  for (int64_t o = 0; o < output; ++o) {
    for (int64_t k = 0; k < filter; ++k) {
      const int64_t i = o * stride + k * dilation - padding;
      if (i >= 0 && i < input && ++hits[i] > 1) return false;
    }
  }
  return true;
}

// Whether each phase has at most one tap, read at dy's own row (m_k = 0):
// what one GEMM for every tap needs (docs/DESIGN.md, "swap1x1").
bool one_unshifted_tap_per_phase(const ConvGeometry& g) {
  for (const Phase& phase : enumerate_phases(g)) {
    const PhaseDim& pd = phase.dims[0];
    if (pd.tap_count > 1 || (pd.tap_count == 1 && pd.conv_padding != 0)) return false;
  }
  return true;
}

TEST(Swap1x1, ServesExactlyTheFiltersWithinTheStride) {
  std::mt19937 rng(3);
  int served = 0, refused = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    ConvGeometry g = one_by_one(rng, 1);
    g.filter[0] = 1 + rng() % 4;
    g.dilation[0] = 1 + rng() % 3;
    g.padding[0] = rng() % 2;
    g.input[0] = g.dilated_filter(0) + rng() % 12;
    derive_output_sizes(g);
    const auto refusal = swap1x1_refusal(g, enumerate_phases(g));
    EXPECT_EQ(!refusal, one_unshifted_tap_per_phase(g))
        << "filter " << g.filter[0] << " dilation " << g.dilation[0] << " stride "
        << g.stride[0];
    if (!refusal) {
      ++served;
      EXPECT_TRUE(taps_never_overlap(g.input[0], g.filter[0], g.stride[0], g.padding[0],
                                     g.dilation[0]));
    } else {
      ++refused;
    }
  }
  EXPECT_GT(served, 200);
  EXPECT_GT(refused, 200);
}

TEST(Swap1x1, KernelEqualToStrideIsServedInPlaceWhereItsSlotsCoverDx) {
  std::mt19937 rng(7);
  ConvGeometry g = one_by_one(rng, 2);
  g.input[0] = g.input[1] = 8;
  g.filter[0] = g.filter[1] = g.stride[0] = g.stride[1] = 2;
  derive_output_sizes(g);
  EXPECT_FALSE(swap1x1_refusal(g, enumerate_phases(g)).has_value());
  EXPECT_FALSE(in_place_refusal(g).has_value());
  ConvGeometry ragged = g, dilated = g;
  ragged.input[0] = 9;  // position 8 has residue 0 but no output: no tap writes it
  derive_output_sizes(ragged);
  ASSERT_TRUE(in_place_refusal(ragged).has_value());
  EXPECT_NE(in_place_refusal(ragged)->find("taps' slots end before dx does in dim 0"),
            std::string::npos) << *in_place_refusal(ragged);
  dilated.filter[1] = 1;
  dilated.stride[1] = 4;
  dilated.dilation[1] = 2;  // a 1-tap dilated dim is still one column block
  derive_output_sizes(dilated);
  EXPECT_FALSE(in_place_refusal(dilated).has_value());
  dilated.filter[1] = 2;  // taps 0 and 2 of stride 4: columns not side by side
  derive_output_sizes(dilated);
  ASSERT_TRUE(in_place_refusal(dilated).has_value());
  EXPECT_NE(in_place_refusal(dilated)->find("dilated"), std::string::npos);
  g.filter[1] = 3;  // taps 0 and 2 of dim 1 land on residue 0 of stride 2
  derive_output_sizes(g);
  ASSERT_TRUE(swap1x1_refusal(g, enumerate_phases(g)).has_value());
  EXPECT_NE(swap1x1_refusal(g, enumerate_phases(g))->find("dim 1"), std::string::npos);
}

// Whether every dx position of a phase with a tap (residue below the filter,
// no dilation or padding) is a tap's slot, o < O: what in_place needs, since
// it zeroes only the phases without one.
bool taps_cover_their_phases(const ConvGeometry& g) {
  for (int i = 0; i < g.spatial_dims; ++i) {
    for (int64_t x = 0; x < g.input[i]; ++x) {
      if (x % g.stride[i] < g.filter[i] && x / g.stride[i] >= g.output[i]) return false;
    }
  }
  return true;
}

TEST(Swap1x1, InPlaceWithTapsServesOnlyWhereTheTapsCoverTheirPhases) {
  std::mt19937 rng(13);
  int served = 0, refused = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    ConvGeometry g = one_by_one(rng);
    for (int i = 0; i < g.spatial_dims; ++i) {
      g.filter[i] = 1 + static_cast<int64_t>(rng() % g.stride[i]);
      g.input[i] = g.filter[i] + rng() % 9;
    }
    derive_output_sizes(g);
    const bool covered = taps_cover_their_phases(g);
    const auto refusal = in_place_refusal(g);
    if (!refusal) {
      ++served;
      EXPECT_TRUE(covered) << format_sizes(g.input, g.spatial_dims) << " filter "
                           << format_sizes(g.filter, g.spatial_dims) << " stride "
                           << format_sizes(g.stride, g.spatial_dims);
    } else {
      const bool slots_end = refusal->find("taps' slots") != std::string::npos;
      refused += slots_end;
      if (slots_end) {
        EXPECT_FALSE(covered);
      }
    }
  }
  EXPECT_GT(served, 100);
  EXPECT_GT(refused, 100);
}

TEST(Swap1x1, WriterNamesRoundTrip) {
  std::vector<std::string> names;
  for (Swap1x1Writer writer : kSwap1x1Writers) {
    EXPECT_EQ(parse_swap1x1_writer(swap1x1_writer_name(writer)), writer);
    names.push_back(swap1x1_writer_name(writer));
  }
  EXPECT_EQ(names, (std::vector<std::string>{"fused", "in_place"}));
  EXPECT_EQ(known_swap1x1_writer_names(), "fused, in_place");
  EXPECT_FALSE(parse_swap1x1_writer("inplace").has_value());
}

TEST(Swap1x1, PlanCarriesTheWriterWhenSwap1x1ServesTheInputGradient) {
  std::mt19937 rng(5);
  ConvGeometry g = one_by_one(rng, 2);
  g.input[0] = g.input[1] = 8;
  g.stride[0] = g.stride[1] = 2;
  g.in_channels = g.filter_in_channels = 8;  // rows of a 32-byte sector
  derive_output_sizes(g);
  const Plan plan = make_plan(g, Strategy::swap1x1, Swap1x1Writer::fused);
  ASSERT_EQ(plan.input.strategy, Strategy::swap1x1);
  ASSERT_TRUE(plan.swap1x1.has_value());
  EXPECT_EQ(plan.swap1x1->writer, Swap1x1Writer::fused);
  EXPECT_EQ(make_plan(g, Strategy::swap1x1).swap1x1->writer, Swap1x1Writer::in_place);
}

TEST(Swap1x1, WriterIsKnownWheneverSwap1x1CanServeAndForcedOnlyWhenItDoes) {
  std::mt19937 rng(11);
  ConvGeometry g = one_by_one(rng, 2);
  g.input[0] = g.input[1] = 8;
  g.stride[0] = g.stride[1] = 2;
  g.padding[0] = 1;  // in_place refuses padding
  derive_output_sizes(g);
  // Planned freely on a GPU, aten computes dx; the writer swap1x1 would use is still known.
  const Plan free = make_plan(g);
  ASSERT_NE(free.input.strategy, Strategy::swap1x1);
  ASSERT_TRUE(free.swap1x1.has_value());
  EXPECT_EQ(free.swap1x1->writer, Swap1x1Writer::fused);
  EXPECT_NE(free.swap1x1->reason.find("padding"), std::string::npos) << free.swap1x1->reason;
  // A forced writer binds only when swap1x1 computes dx.
  EXPECT_NO_THROW(make_plan(g, Strategy::phase, Swap1x1Writer::in_place));
  EXPECT_EQ(make_plan(g, Strategy::swap1x1, Swap1x1Writer::in_place).swap1x1->writer,
            Swap1x1Writer::fused);
  EXPECT_THROW(make_plan(g, Strategy::swap1x1, Swap1x1Writer::in_place, /*strict=*/true),
               std::invalid_argument);
}

}  // namespace
}  // namespace bwdconv
