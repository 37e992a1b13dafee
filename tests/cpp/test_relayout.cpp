#include <gtest/gtest.h>

#include "dispatch/plan.h"
#include "dispatch/relayout.h"
#include "dispatch/strategies.h"

namespace bwdconv {
namespace {

ConvGeometry nchw(int dims) {
  ConvGeometry g;
  g.device = DeviceKind::CUDA;
  g.layout = MemoryLayout::Contiguous;
  g.spatial_dims = dims;
  g.batch = 2;
  g.in_channels = g.filter_in_channels = 8;
  g.out_channels = 4;
  for (int i = 0; i < dims; ++i) {
    g.input[i] = 9;
    g.filter[i] = 3;
    g.stride[i] = 2;
    g.dilation[i] = 1;
  }
  derive_output_sizes(g);
  return g;
}

TEST(Relayout, ServesNchwAndNcdhwBothGradients) {
  for (const int dims : {2, 3}) {
    const ConvGeometry g = nchw(dims);
    const auto phases = enumerate_phases(g);
    EXPECT_FALSE(refusal(Strategy::relayout, Gradient::input, g, phases).has_value()) << dims;
    EXPECT_FALSE(refusal(Strategy::relayout, Gradient::weight, g, phases).has_value()) << dims;
    const Plan plan = make_plan(g, Strategy::relayout);
    EXPECT_EQ(plan.input.strategy, Strategy::relayout);
    EXPECT_EQ(plan.weight.strategy, Strategy::relayout);
  }
}

TEST(Relayout, RefusesCpu3DWhosePaddingReachesTheInputsSize) {
  ConvGeometry g = nchw(3);
  g.device = DeviceKind::CPU;
  g.input[0] = 2;
  g.padding[0] = 2;
  derive_output_sizes(g);
  ASSERT_TRUE(relayout_refusal(g, {}).has_value());
  EXPECT_NE(relayout_refusal(g, {})->find("padding at least the input's size"),
            std::string::npos);
  g.padding[0] = 1;
  derive_output_sizes(g);
  EXPECT_FALSE(relayout_refusal(g, {}).has_value());
  g.padding[0] = 2;
  g.device = DeviceKind::CUDA;
  EXPECT_FALSE(relayout_refusal(g, {}).has_value());
  g.device = DeviceKind::CPU;
  g.spatial_dims = 2;
  EXPECT_FALSE(relayout_refusal(g, {}).has_value());
}

TEST(Relayout, RefusesChannelsLast1DAndCpuBfloat16In3D) {
  ConvGeometry last = nchw(2);
  last.layout = MemoryLayout::ChannelsLast;
  ASSERT_TRUE(relayout_refusal(last, enumerate_phases(last)).has_value());
  EXPECT_NE(relayout_refusal(last, {})->find("channels_last already"), std::string::npos);
  const ConvGeometry line = nchw(1);
  ASSERT_TRUE(relayout_refusal(line, {}).has_value());
  EXPECT_NE(relayout_refusal(line, {})->find("1D"), std::string::npos);
  ConvGeometry cpu_bfloat16 = nchw(3);
  cpu_bfloat16.device = DeviceKind::CPU;
  cpu_bfloat16.dtype = DType::BFloat16;
  ASSERT_TRUE(relayout_refusal(cpu_bfloat16, {}).has_value());
  EXPECT_NE(relayout_refusal(cpu_bfloat16, {})->find("3D bfloat16 on the CPU"), std::string::npos);
  cpu_bfloat16.spatial_dims = 2;
  EXPECT_FALSE(relayout_refusal(cpu_bfloat16, {}).has_value());
  ConvGeometry gpu_bfloat16 = nchw(3);
  gpu_bfloat16.dtype = DType::BFloat16;
  EXPECT_FALSE(relayout_refusal(gpu_bfloat16, {}).has_value());
  // Never a rule's choice: the rules plan it nowhere, only forcing or tuning does.
  for (const ConvGeometry& g : {nchw(2), nchw(3)}) {
    const Plan plan = make_plan(g);
    EXPECT_NE(plan.input.strategy, Strategy::relayout);
    EXPECT_NE(plan.weight.strategy, Strategy::relayout);
  }
}

}  // namespace
}  // namespace bwdconv
