#include <gtest/gtest.h>

#include <stdexcept>

#include "dispatch/plan.h"

namespace bwdconv {
namespace {

ConvGeometry small_conv3d() {
  ConvGeometry g;
  g.spatial_dims = 3;
  g.batch = 1;
  g.in_channels = 2;
  g.out_channels = 2;
  g.filter_in_channels = 2;
  g.input = {5, 6, 7};
  g.filter = {3, 3, 3};
  g.stride = {2, 2, 2};
  g.padding = {1, 1, 1};
  g.dilation = {1, 1, 1};
  derive_output_sizes(g);
  return g;
}

TEST(Plan, StrategyNamesRoundTrip) {
  for (Strategy strategy : all_strategies()) {
    const auto parsed = parse_strategy(strategy_name(strategy));
    ASSERT_TRUE(parsed.has_value());
    EXPECT_EQ(*parsed, strategy);
  }
  EXPECT_FALSE(parse_strategy("no_such_strategy").has_value());
  EXPECT_EQ(all_strategies().size(), kStrategyCount);
  EXPECT_NE(known_strategy_names().find("aten"), std::string::npos);
}

TEST(Plan, EveryGradientHasAStrategyAndAReason) {
  const Plan plan = make_plan(small_conv3d());
  for (Gradient gradient : {Gradient::input, Gradient::weight}) {
    EXPECT_EQ(plan.of(gradient).strategy, Strategy::aten);
    EXPECT_FALSE(plan.of(gradient).reason.empty());
  }
}

TEST(Plan, ForcedStrategyIsRecorded) {
  const Plan plan = make_plan(small_conv3d(), Strategy::aten);
  EXPECT_NE(plan.input.reason.find("forced"), std::string::npos);
}

TEST(Plan, InvalidGeometryThrowsWithTheReason) {
  ConvGeometry g = small_conv3d();
  g.stride[1] = 0;
  try {
    make_plan(g);
    FAIL() << "make_plan accepted stride 0";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("non-positive stride"), std::string::npos);
  }
}

}  // namespace
}  // namespace bwdconv
