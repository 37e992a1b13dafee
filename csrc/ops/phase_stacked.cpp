#include "ops/precompiled.h"  // first, as the precompiled header must be

#include "ops/phase_stacked.h"

#include <string>
#include <vector>

#include "ops/aten.h"
#include "ops/filter.h"
#include "ops/kernels.h"

namespace bwdconv::ops {
namespace {

// [groups * stacked * C/g, O/g, F...]: phase n's adjoint sub-filter placed at
// its tap offsets inside the common filter size F, zeros around it.
at::Tensor build_stacked_filter(const Plan& plan, const at::Tensor& weight, int64_t groups) {
  const ConvGeometry& g = plan.geometry;
  const StackedGeometry& sg = plan.stacked;
  const int64_t stacked = static_cast<int64_t>(sg.stacked_phases.size());
  std::vector<int64_t> sizes{groups, stacked, g.in_channels / groups, g.out_channels / groups};
  for (int i = 0; i < g.spatial_dims; ++i) sizes.push_back(sg.dims[i].filter);
  at::Tensor filter = at::zeros(sizes, weight.options());
  for (int64_t n = 0; n < stacked; ++n) {
    const Phase& phase = plan.phases[sg.stacked_phases[n]];
    std::vector<int64_t> grouped{groups, g.in_channels / groups, g.out_channels / groups};
    at::Tensor target = filter.select(1, n);
    for (int i = 0; i < g.spatial_dims; ++i) {
      const int64_t offset = sg.tap_offsets[n][i];
      target = target.slice(i + 3, offset, offset + phase.dims[i].tap_count);
      grouped.push_back(phase.dims[i].tap_count);
    }
    target.copy_(built_phase_adjoint_filter(weight, phase, groups).reshape(grouped));
  }
  sizes[0] = groups * stacked * (g.in_channels / groups);
  sizes.erase(sizes.begin() + 1, sizes.begin() + 3);
  return filter.reshape(sizes);
}

// build_stacked_filter, reused inside bwdconv.reuse_weight_transforms(): the
// transform named by everything of the plan it reads.
at::Tensor stacked_filter(const Plan& plan, const at::Tensor& weight, int64_t groups) {
  const auto transform = [&] {
    const StackedGeometry& sg = plan.stacked;
    std::string text = "stacked groups " + std::to_string(groups) + " filter";
    for (int i = 0; i < plan.geometry.spatial_dims; ++i) {
      text += " " + std::to_string(sg.dims[i].filter);
    }
    for (size_t n = 0; n < sg.stacked_phases.size(); ++n) {
      text += " | at";
      for (int i = 0; i < plan.geometry.spatial_dims; ++i) {
        text += " " + std::to_string(sg.tap_offsets[n][i]);
      }
      text += " taps" + phase_taps_text(plan.phases[sg.stacked_phases[n]]);
    }
    return text;
  };
  return cached_filter(weight, transform,
                       [&] { return build_stacked_filter(plan, weight, groups); });
}

}  // namespace

at::Tensor phase_stacked_grad_input(const Plan& plan, const at::Tensor& grad_output,
                                    const at::Tensor& weight, at::MemoryFormat format) {
  const ConvGeometry& g = plan.geometry;
  const StackedGeometry& sg = plan.stacked;
  const int dims = g.spatial_dims;
  const int64_t groups = g.groups, per_group = g.in_channels / groups;
  const int64_t stacked = static_cast<int64_t>(sg.stacked_phases.size());

  std::vector<int64_t> padding(dims), dilation(dims);
  for (int i = 0; i < dims; ++i) {
    padding[i] = sg.dims[i].padding;
    dilation[i] = sg.dims[i].sub_dilation;
  }
  at::Tensor out =
      stride1_convolution(grad_output, stacked_filter(plan, weight, groups), padding, dilation,
                          groups);

  // Stacked phase n's result is channels [n*C/g, (n+1)*C/g) of each group's
  // block of stacked*C/g channels; the other phases are empty.
  std::vector<PhaseInput> inputs(plan.phases.size());
  for (int64_t n = 0; n < stacked; ++n) {
    PhaseInput& in = inputs[sg.stacked_phases[n]];
    in.write = hip::PhaseWrite::Copy;
    in.result = out;
    in.channel_offset = n * per_group;
  }
  at::Tensor dx = empty_input_gradient(plan, grad_output, format);
  interleave(dx, plan, inputs, ChannelMap{per_group, stacked * per_group});
  return dx;
}

}  // namespace bwdconv::ops
