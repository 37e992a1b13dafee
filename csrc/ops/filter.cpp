#include "ops/precompiled.h"  // first, as the precompiled header must be

#include "ops/filter.h"

#include <string>
#include <vector>

#include "ops/weight_cache.h"

namespace bwdconv::ops {

namespace {

at::Tensor adjoint_of(const at::Tensor& weight, int64_t groups) {
  const int64_t out_channels = weight.size(0), in_per_group = weight.size(1);
  std::vector<int64_t> grouped{groups, out_channels / groups, in_per_group};
  std::vector<int64_t> swapped{groups * in_per_group, out_channels / groups};
  std::vector<int64_t> flipped_dims;  // flipping a dim of size 1 would only copy
  for (int64_t d = 2; d < weight.dim(); ++d) {
    grouped.push_back(weight.size(d));
    swapped.push_back(weight.size(d));
    if (weight.size(d) > 1) flipped_dims.push_back(d);
  }
  const at::Tensor adjoint = weight.reshape(grouped).transpose(1, 2).reshape(swapped);
  return flipped_dims.empty() ? adjoint : adjoint.flip(flipped_dims);
}

}  // namespace

at::Tensor adjoint_filter(const at::Tensor& weight, int64_t groups) {
  return cached_filter(
      weight, [&] { return "adjoint groups " + std::to_string(groups); },
      [&] { return adjoint_of(weight, groups); });
}

std::string phase_taps_text(const Phase& phase) {
  std::string text;
  for (int i = 0; i < phase.spatial_dims; ++i) {
    const PhaseDim& pd = phase.dims[i];
    text += " " + std::to_string(pd.first_tap) + ":" + std::to_string(pd.tap_count) + ":" +
            std::to_string(pd.tap_step);
  }
  return text;
}

at::Tensor phase_adjoint_filter(const at::Tensor& weight, const Phase& phase, int64_t groups) {
  const auto transform = [&] {
    return "phase adjoint groups " + std::to_string(groups) + " taps" + phase_taps_text(phase);
  };
  return cached_filter(weight, transform,
                       [&] { return built_phase_adjoint_filter(weight, phase, groups); });
}

at::Tensor built_phase_adjoint_filter(const at::Tensor& weight, const Phase& phase,
                                      int64_t groups) {
  at::Tensor taps = weight;
  for (int i = 0; i < phase.spatial_dims; ++i) {
    const PhaseDim& pd = phase.dims[i];
    const int64_t last = pd.first_tap + (pd.tap_count - 1) * pd.tap_step;
    taps = taps.slice(i + 2, pd.first_tap, last + 1, pd.tap_step);
  }
  return adjoint_of(taps, groups);
}

}  // namespace bwdconv::ops
