// phase_stacked: every non-empty phase's sub-filter zero-padded to one size
// and stacked into the output channels of ONE stride-1 convolution, then one
// interleave-and-crop pass (docs/DESIGN.md, "phase_stacked").
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "phase.h"

namespace bwdconv {

// One spatial dim of the stacked convolution.
struct StackedDim {
  int64_t padding = 0;       // P = max over phases of conv_padding
  int64_t filter = 0;        // taps of the zero-padded sub-filters
  int64_t sub_dilation = 1;  // d/g, shared by every phase
  int64_t output = 0;        // O + 2P - (d/g)(filter - 1)
  int64_t rows = 0;          // Q = ceil((I + p)/s): q rows interleaved before the crop
};

struct StackedGeometry {
  std::array<StackedDim, kMaxSpatialDims> dims{};
  int spatial_dims = 0;
  std::vector<int64_t> stacked_phases;  // indices (into enumerate_phases) of non-empty phases
  // Per stacked phase and dim: where its taps start inside the padded sub-filter,
  // (P - conv_padding) / (d/g).
  std::vector<std::array<int64_t, kMaxSpatialDims>> tap_offsets;
};

// Why phase_stacked cannot serve the geometry, or nothing when it can.
std::optional<std::string> phase_stacked_refusal(const ConvGeometry& geometry,
                                                 const std::vector<Phase>& phases);

// The stacked convolution of a geometry phase_stacked can serve.
StackedGeometry make_stacked_geometry(const ConvGeometry& geometry,
                                      const std::vector<Phase>& phases);

}  // namespace bwdconv
