#include <gtest/gtest.h>

#include <random>
#include <stdexcept>

#include "dispatch/plan.h"

namespace bwdconv {
namespace {

ConvGeometry conv(int dims, int64_t size, int64_t filter, int64_t stride, int64_t padding,
                  int64_t batch = 1, int64_t channels = 2, int64_t groups = 1) {
  ConvGeometry g;
  g.device = DeviceKind::CUDA;
  g.spatial_dims = dims;
  g.batch = batch;
  g.in_channels = channels;
  g.out_channels = channels;
  g.groups = groups;
  g.filter_in_channels = channels / groups;
  for (int i = 0; i < dims; ++i) {
    g.input[i] = size;
    g.filter[i] = filter;
    g.stride[i] = stride;
    g.padding[i] = padding;
    g.dilation[i] = 1;
  }
  derive_output_sizes(g);
  return g;
}

// The input-gradient strategy planned for `g` after change(g).
template <typename Change>
Strategy input_strategy_after(ConvGeometry g, Change change) {
  change(g);
  derive_output_sizes(g);
  return make_plan(g).input.strategy;
}

TEST(Plan, StrategyNamesRoundTrip) {
  for (Strategy strategy : all_strategies()) {
    const auto parsed = parse_strategy(strategy_name(strategy));
    ASSERT_TRUE(parsed.has_value());
    EXPECT_EQ(*parsed, strategy);
  }
  EXPECT_FALSE(parse_strategy("no_such_strategy").has_value());
  EXPECT_EQ(all_strategies().size(), kStrategyCount);
  std::string names;
  for (const StrategyEntry& e : kStrategies) {
    names += (names.empty() ? "" : ", ") + std::string(e.name);
  }
  EXPECT_EQ(known_strategy_names(), names);
}

TEST(Plan, EveryStrategyIsAccountedForWithAReason) {
  const Plan plan = make_plan(conv(3, 7, 3, 2, 1));
  for (Gradient gradient : {Gradient::input, Gradient::weight}) {
    const GradientPlan& gp = plan.of(gradient);
    EXPECT_FALSE(gp.reason.empty());
    ASSERT_EQ(gp.candidates.size(), kStrategyCount);
    int chosen = 0;
    for (const Candidate& c : gp.candidates) {
      EXPECT_FALSE(candidate_reason(gp, c).empty()) << strategy_name(c.strategy);
      if (c.strategy == gp.strategy) {
        EXPECT_TRUE(c.serves);
        ++chosen;
      }
    }
    EXPECT_EQ(chosen, 1);
  }
}

TEST(Plan, CandidatesSayWhetherTheyWereRefusedChosenOrRankedBelowTheChoice) {
  GradientPlan plan = make_plan(conv(2, 8, 1, 2, 0)).weight;
  plan.strategy = Strategy::splitk;
  plan.reason = "the reason";
  const auto reason_of = [&](Strategy strategy) {
    return candidate_reason(plan, plan.candidates[static_cast<size_t>(strategy)]);
  };
  EXPECT_EQ(reason_of(Strategy::splitk), "chosen: the reason");
  EXPECT_EQ(reason_of(Strategy::aten), "ranked below splitk");
  EXPECT_EQ(reason_of(Strategy::phase), "computes the input gradient only");
  plan.measured = true;
  EXPECT_EQ(reason_of(Strategy::aten), "measured: ranked below splitk");
}

// GPUs get aten by rule (the seeds' choices won and lost on the same kind of
// shape on an H200), and the reason names the seeds' choice for the tuner.
void expect_aten_waiting_for(const GradientPlan& plan, const char* seed_choice) {
  EXPECT_EQ(plan.strategy, Strategy::aten);
  EXPECT_NE(plan.reason.find("not yet measured on GPUs"), std::string::npos) << plan.reason;
  EXPECT_NE(plan.reason.find(seed_choice), std::string::npos) << plan.reason;
}

TEST(Plan, DefaultChoicesOnGpusWaitForMeasurements) {
  EXPECT_EQ(make_plan(conv(2, 9, 3, 1, 1)).input.strategy, Strategy::aten);
  expect_aten_waiting_for(make_plan(conv(2, 50, 1, 2, 0)).input, "swap1x1");
  expect_aten_waiting_for(make_plan(conv(2, 9, 3, 2, 1)).input, "phase_stacked");
  expect_aten_waiting_for(make_plan(conv(2, 200, 3, 2, 1, 8, 16)).input, "phase (");
}

TEST(Plan, TransposedForwardOnTheCpuIsAtensUntilMeasured) {
  // A forward that is a transposed convolution keeps aten's own kernel on the
  // CPU, where the same geometry's input gradient would take swap1x1.
  ConvGeometry one_by_one = conv(2, 50, 1, 2, 0, 4, 64);
  one_by_one.device = DeviceKind::CPU;
  one_by_one.dtype = DType::BFloat16;
  ASSERT_EQ(make_plan(one_by_one).input.strategy, Strategy::swap1x1);
  one_by_one.transposed = true;
  const Plan plan = make_plan(one_by_one);
  EXPECT_EQ(plan.input.strategy, Strategy::aten);
  EXPECT_NE(plan.input.reason.find("transposed"), std::string::npos) << plan.input.reason;
  EXPECT_EQ(make_plan(one_by_one, Strategy::swap1x1).input.strategy, Strategy::swap1x1);
  // On a GPU the seeds' choice waits for the GPU benchmark, as for any input gradient.
  ConvGeometry unet = conv(2, 16, 2, 2, 0, 1, 8);
  unet.transposed = true;
  expect_aten_waiting_for(make_plan(unet).input, "swap1x1");
}

TEST(Plan, Float16TransposedForwardInChannelsLastOnTheCpuTakesPhase) {
  ConvGeometry vae = conv(2, 64, 3, 2, 1, 1, 64);  // the matching convolution's geometry
  vae.device = DeviceKind::CPU;
  vae.dtype = DType::Float16;
  vae.layout = MemoryLayout::ChannelsLast;
  vae.out_channels = 128;
  vae.transposed = true;
  EXPECT_EQ(make_plan(vae).input.strategy, Strategy::phase);
  EXPECT_NE(make_plan(vae).input.reason.find("transposed"), std::string::npos);
  const auto input_strategy = [&](auto change) { return input_strategy_after(vae, change); };
  EXPECT_EQ(input_strategy([](ConvGeometry& g) { g.layout = MemoryLayout::Contiguous; }),
            Strategy::aten);
  EXPECT_EQ(input_strategy([](ConvGeometry& g) { g.dtype = DType::BFloat16; }), Strategy::aten);
  EXPECT_EQ(input_strategy([](ConvGeometry& g) { g.in_channels = g.filter_in_channels = 16; }),
            Strategy::aten);  // U-Net's narrow lines: phase was slower
  EXPECT_EQ(input_strategy([](ConvGeometry& g) { g.stride = {1, 1, 0}; g.padding = {1, 1, 0}; }),
            Strategy::aten);
}

TEST(Plan, Float16WeightGradientOnTheCpuTakesSplitkFromTwoToTheTwentyFlops) {
  // 2 x 2 x 8 x 8 x (14 x 14) x (2 x 2) = 200704 flops: below; batch 8: 802816,
  // still below; 8 x 16 channels in and out: 3211264, at least 2^20.
  ConvGeometry g = conv(2, 28, 2, 2, 0, 2, 8);
  g.device = DeviceKind::CPU;
  g.dtype = DType::Float16;
  EXPECT_EQ(make_plan(g).weight.strategy, Strategy::aten);
  g.batch = 8;
  EXPECT_EQ(make_plan(g).weight.strategy, Strategy::aten);
  g.in_channels = g.out_channels = g.filter_in_channels = 16;
  EXPECT_EQ(make_plan(g).weight.strategy, Strategy::splitk);
  EXPECT_NE(make_plan(g).weight.reason.find("float16"), std::string::npos);
  g.layout = MemoryLayout::ChannelsLast;
  EXPECT_EQ(make_plan(g).weight.strategy, Strategy::splitk);
  g.dtype = DType::Float32;
  EXPECT_EQ(make_plan(g).weight.strategy, Strategy::aten);
  g.dtype = DType::Float16;
  g.device = DeviceKind::CUDA;
  EXPECT_EQ(make_plan(g).weight.strategy, Strategy::aten);
}

TEST(Plan, DefaultChoicesOnTheCpuFollowItsMeasurement) {
  ConvGeometry strided = conv(2, 200, 3, 2, 1, 8, 16);
  strided.device = DeviceKind::CPU;
  EXPECT_EQ(make_plan(strided).input.strategy, Strategy::aten);
  // 1x1 with stride > 1, 2D, one group, NCHW: swap1x1 in bfloat16 from 2^18
  // flops and in float32 from 2^31; aten otherwise. Here 2 x 4 x 64 x 64 x
  // (25 x 25) = 20480000 flops.
  ConvGeometry one_by_one = conv(2, 50, 1, 2, 0, 4, 64);
  one_by_one.device = DeviceKind::CPU;
  one_by_one.dtype = DType::BFloat16;
  EXPECT_EQ(make_plan(one_by_one).input.strategy, Strategy::swap1x1);
  EXPECT_EQ(make_plan(one_by_one).weight.strategy, Strategy::aten);
  const auto input_strategy = [&](auto change) { return input_strategy_after(one_by_one, change); };
  for (DType dtype : {DType::Float32, DType::Float16, DType::Float64}) {
    EXPECT_EQ(input_strategy([&](ConvGeometry& g) { g.dtype = dtype; }), Strategy::aten);
  }
  EXPECT_EQ(input_strategy([](ConvGeometry& g) { g.layout = MemoryLayout::ChannelsLast; }),
            Strategy::aten);
  EXPECT_EQ(input_strategy([](ConvGeometry& g) { g.batch = 1; g.input = {22, 23, 0}; }),
            Strategy::swap1x1);  // 2 x 64 x 64 x (11 x 12) = 1081344 flops
  EXPECT_EQ(input_strategy([](ConvGeometry& g) { g.batch = 1; g.input = {16, 16, 0}; }),
            Strategy::swap1x1);  // 2 x 64 x 64 x (8 x 8) = 524288 flops
  EXPECT_EQ(input_strategy([](ConvGeometry& g) { g.batch = 1; g.input = {10, 10, 0}; }),
            Strategy::aten);  // 2 x 64 x 64 x (5 x 5) = 204800 flops
  // float32 from 2^31 flops: batch 32 at 182x182 (91 x 91 out) is 2170814464,
  // at 180x180 (90 x 90 out) 2123366400.
  const auto float32_at = [](int64_t size) {
    return [size](ConvGeometry& g) {
      g.dtype = DType::Float32;
      g.batch = 32;
      g.input = {size, size, 0};
    };
  };
  EXPECT_EQ(input_strategy(float32_at(182)), Strategy::swap1x1);
  EXPECT_EQ(input_strategy(float32_at(180)), Strategy::aten);
  EXPECT_EQ(input_strategy([](ConvGeometry& g) { g.groups = 2; g.filter_in_channels = 32; }),
            Strategy::aten);
  ConvGeometry volume = conv(3, 50, 1, 2, 0, 4, 64);
  volume.device = DeviceKind::CPU;
  volume.dtype = DType::BFloat16;
  EXPECT_EQ(make_plan(volume).input.strategy, Strategy::aten);
  EXPECT_TRUE(make_plan(volume).swap1x1.has_value());  // it still serves when forced
}

// 1x1 stride 1 on the CPU: aten in every dtype and layout (a GEMM with no
// zeros to skip lost to aten's bfloat16 backward at ResNet-50 sizes once a
// call's cost was counted; benchmarks/results/cpu-2026-11-26-rules).
TEST(Plan, OneByOneStrideOneOnTheCpuIsAtensInEveryDtypeAndLayout) {
  ConvGeometry g = conv(2, 14, 1, 1, 0, 8, 64);
  g.device = DeviceKind::CPU;
  for (DType dtype : {DType::BFloat16, DType::Float32, DType::Float16}) {
    for (MemoryLayout layout : {MemoryLayout::Contiguous, MemoryLayout::ChannelsLast}) {
      g.dtype = dtype;
      g.layout = layout;
      EXPECT_EQ(make_plan(g).input.strategy, Strategy::aten);
      EXPECT_TRUE(make_plan(g).swap1x1.has_value());  // it still serves when forced
    }
  }
}

// A float16 channels_last geometry on the CPU: 32 -> 64 channels, 16^dims input.
ConvGeometry cpu_float16_channels_last(int dims, int64_t filter) {
  ConvGeometry g = conv(dims, 16, filter, 2, filter / 2, 1, 32);
  g.out_channels = 64;
  derive_output_sizes(g);
  g.device = DeviceKind::CPU;
  g.dtype = DType::Float16;
  g.layout = MemoryLayout::ChannelsLast;
  return g;
}

// float16 channels_last on the CPU: phase from 32 input and 64 output
// channels and 8192 dx elements, one group, 2D; the other rules otherwise.
TEST(Plan, CpuFloat16ChannelsLastTakesPhaseWhenChannelsAreWide) {
  for (int64_t filter : {1, 3}) {
    const ConvGeometry g = cpu_float16_channels_last(2, filter);
    EXPECT_EQ(make_plan(g).input.strategy, Strategy::phase) << filter;
    // 2 x 64 x 32 x 8 x 8 x filter^2 flops: splitk for the 3x3 filter, from 2^20.
    EXPECT_EQ(make_plan(g).weight.strategy, filter == 3 ? Strategy::splitk : Strategy::aten);
    auto expect_no_phase = [&](const ConvGeometry& other, const char* why) {
      EXPECT_EQ(make_plan(other).input.strategy, Strategy::aten) << why << ", filter " << filter;
    };
    ConvGeometry narrow = g;
    narrow.in_channels = narrow.filter_in_channels = 16;
    expect_no_phase(narrow, "16 input channels");
    ConvGeometry few_outputs = g;
    few_outputs.out_channels = 32;
    expect_no_phase(few_outputs, "32 output channels");
    ConvGeometry small = g;
    small.input = {15, 15, 0};
    derive_output_sizes(small);
    expect_no_phase(small, "32 x 15 x 15 dx elements");
    ConvGeometry grouped = g;
    grouped.groups = 2;
    grouped.filter_in_channels = 16;
    expect_no_phase(grouped, "two groups");
    ConvGeometry nchw = g;
    nchw.layout = MemoryLayout::Contiguous;
    expect_no_phase(nchw, "NCHW");
    ConvGeometry bf16 = g;
    bf16.dtype = DType::BFloat16;
    expect_no_phase(bf16, "bfloat16");
    expect_no_phase(cpu_float16_channels_last(3, filter), "3D");
    ConvGeometry gpu = g;
    gpu.device = DeviceKind::CUDA;
    EXPECT_EQ(make_plan(gpu).input.strategy, Strategy::aten);
  }
}

TEST(Plan, SeedSplitKShapeSplitsAndSmallReductionsDoNot) {
  // convbfp16 -n 16 -c 16 -H 225 -W 225 -k 64 -y 3 -x 3 -p 1 -q 1 -u 1 -v 1 -F 4
  ConvGeometry seed = conv(2, 225, 3, 1, 1, 16, 16);
  seed.out_channels = 64;
  derive_output_sizes(seed);
  EXPECT_FALSE(splitk_not_worth_it(seed).has_value());
  const Plan plan = make_plan(seed);
  expect_aten_waiting_for(plan.weight, "splitk");
  EXPECT_GE(plan.splitk.chunks(), 2);
  EXPECT_TRUE(splitk_not_worth_it(conv(2, 9, 3, 1, 1)).has_value());
}

TEST(Plan, ForcedStrategyServesWhatItCanAndPlansTheRest) {
  const Plan forced = make_plan(conv(2, 9, 3, 2, 1), Strategy::scatter);
  EXPECT_EQ(forced.input.strategy, Strategy::scatter);
  EXPECT_NE(forced.input.reason.find("forced"), std::string::npos);
  EXPECT_NE(forced.weight.strategy, Strategy::scatter);
  EXPECT_NE(forced.weight.reason.find("forced scatter cannot serve it: computes the input"),
            std::string::npos) << forced.weight.reason;
  const Plan neither = make_plan(conv(2, 9, 3, 2, 1), Strategy::swap1x1);
  EXPECT_EQ(neither.input.strategy, make_plan(conv(2, 9, 3, 2, 1)).input.strategy);
  EXPECT_NE(neither.input.reason.find("forced swap1x1 cannot serve it: the dilated filter"),
            std::string::npos) << neither.input.reason;
}

TEST(Plan, NoForcedStrategyServesAnEmptyTensor) {
  ConvGeometry empty_batch = conv(2, 9, 3, 2, 1, /*batch=*/0);
  // A transposed convolution's empty output: its matching convolution's
  // input is empty while the padding leaves it an output.
  ConvGeometry empty_input = conv(2, 9, 1, 1, 2);
  empty_input.input[1] = 0;
  derive_output_sizes(empty_input);
  ASSERT_GT(empty_input.output[1], 0);
  for (const ConvGeometry& g : {empty_batch, empty_input}) {
    for (Strategy forced : all_strategies()) {
      const Plan plan = make_plan(g, forced);
      EXPECT_EQ(plan.input.strategy, Strategy::aten) << strategy_name(forced);
      EXPECT_EQ(plan.weight.strategy, Strategy::aten) << strategy_name(forced);
      if (forced != Strategy::aten && computes(forced, Gradient::input)) {
        EXPECT_NE(plan.input.reason.find("an empty tensor is aten's to make"), std::string::npos)
            << plan.input.reason;
      }
    }
  }
}

TEST(Plan, StrictForcingRefusesAShapeItServesNeitherGradientOf) {
  EXPECT_NO_THROW(make_plan(conv(2, 9, 3, 2, 1), Strategy::scatter, std::nullopt, true));
  try {
    make_plan(conv(2, 9, 3, 2, 1), Strategy::swap1x1, std::nullopt, /*strict=*/true);
    FAIL() << "swap1x1 was forced strictly on a 3x3 filter";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("is longer than the stride"), std::string::npos)
        << error.what();
  }
}

TEST(Plan, StackedRefusedOnlyForMisalignedDilation) {
  ConvGeometry g = conv(1, 20, 4, 2, 0);
  g.dilation[0] = 3;
  derive_output_sizes(g);
  const Plan plan = make_plan(g);
  EXPECT_TRUE(refusal(Strategy::phase_stacked, Gradient::input, g, plan.phases).has_value());
  EXPECT_NE(plan.input.strategy, Strategy::phase_stacked);
}

TEST(Plan, GroupsDoNotChangeThePhases) {
  const Plan grouped = make_plan(conv(2, 9, 3, 2, 1, 2, 8, 4));
  const Plan plain = make_plan(conv(2, 9, 3, 2, 1, 2, 8, 1));
  ASSERT_EQ(grouped.phases.size(), plain.phases.size());
  for (size_t i = 0; i < grouped.phases.size(); ++i) {
    EXPECT_EQ(grouped.phases[i].tap_count(), plain.phases[i].tap_count());
  }
}

TEST(Plan, InvalidGeometryThrowsWithTheReason) {
  ConvGeometry g = conv(3, 7, 3, 2, 1);
  g.stride[1] = 0;
  try {
    make_plan(g);
    FAIL() << "make_plan accepted stride 0";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("non-positive stride"), std::string::npos);
  }
}

TEST(Plan, RandomGeometriesAlwaysPlan) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 2000; ++trial) {
    const int dims = 1 + rng() % 3;
    ConvGeometry g = conv(dims, 1, 1, 1, 0, 1 + rng() % 4, 1 + rng() % 8);
    for (int i = 0; i < dims; ++i) {
      g.filter[i] = 1 + rng() % 4;
      g.stride[i] = 1 + rng() % 4;
      g.dilation[i] = 1 + rng() % 3;
      g.padding[i] = rng() % 3;
      g.input[i] = std::max<int64_t>(1, g.dilated_filter(i) - 2 * g.padding[i]) + rng() % 6;
    }
    derive_output_sizes(g);
    const Plan plan = make_plan(g);
    EXPECT_FALSE(refusal(plan.input.strategy, Gradient::input, g, plan.phases));
    EXPECT_FALSE(refusal(plan.weight.strategy, Gradient::weight, g, plan.phases));
  }
}

}  // namespace
}  // namespace bwdconv
