#include "phase_stacked.h"

#include <algorithm>

namespace bwdconv {
namespace {

// P per dim: the largest sub-convolution padding among non-empty phases.
std::array<int64_t, kMaxSpatialDims> common_padding(const std::vector<Phase>& phases,
                                                    int spatial_dims) {
  std::array<int64_t, kMaxSpatialDims> padding{};
  for (const Phase& phase : phases) {
    if (phase.empty()) continue;
    for (int i = 0; i < spatial_dims; ++i) {
      padding[i] = std::max(padding[i], phase.dims[i].conv_padding);
    }
  }
  return padding;
}

}  // namespace

std::optional<std::string> phase_stacked_refusal(const ConvGeometry& g,
                                                 const std::vector<Phase>& phases) {
  const auto padding = common_padding(phases, g.spatial_dims);
  for (const Phase& phase : phases) {
    if (phase.empty()) continue;
    for (int i = 0; i < g.spatial_dims; ++i) {
      const PhaseDim& pd = phase.dims[i];
      if ((padding[i] - pd.conv_padding) % pd.sub_dilation != 0) {
        return "the phases' first taps are not aligned to the sub-filter dilation " +
               std::to_string(pd.sub_dilation) + " in spatial dim " + std::to_string(i) +
               " (dilation " + std::to_string(g.dilation[i]) + ", stride " +
               std::to_string(g.stride[i]) + "), so they cannot share one convolution";
      }
    }
  }
  return std::nullopt;
}

StackedGeometry make_stacked_geometry(const ConvGeometry& g, const std::vector<Phase>& phases) {
  StackedGeometry sg;
  sg.spatial_dims = g.spatial_dims;
  const auto padding = common_padding(phases, g.spatial_dims);
  for (int64_t index = 0; index < static_cast<int64_t>(phases.size()); ++index) {
    const Phase& phase = phases[index];
    if (phase.empty()) continue;
    sg.stacked_phases.push_back(index);
    std::array<int64_t, kMaxSpatialDims> offsets{};
    for (int i = 0; i < g.spatial_dims; ++i) {
      const PhaseDim& pd = phase.dims[i];
      offsets[i] = (padding[i] - pd.conv_padding) / pd.sub_dilation;
      sg.dims[i].filter = std::max(sg.dims[i].filter, offsets[i] + pd.tap_count);
      sg.dims[i].sub_dilation = pd.sub_dilation;
    }
    sg.tap_offsets.push_back(offsets);
  }
  for (int i = 0; i < g.spatial_dims; ++i) {
    StackedDim& sd = sg.dims[i];
    sd.padding = padding[i];
    sd.output = g.output[i] + 2 * sd.padding - sd.sub_dilation * (sd.filter - 1);
    sd.rows = (g.input[i] + g.padding[i] + g.stride[i] - 1) / g.stride[i];
  }
  return sg;
}

}  // namespace bwdconv
