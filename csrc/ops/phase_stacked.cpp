#include "ops/phase_stacked.h"

#include <vector>

#include "ops/filter.h"

namespace bwdconv::ops {
namespace {

// [groups * stacked * C/g, O/g, F...]: phase n's adjoint sub-filter placed at
// its tap offsets inside the common filter size F, zeros around it.
at::Tensor stacked_filter(const Plan& plan, const at::Tensor& weight, int64_t groups) {
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
    target.copy_(phase_adjoint_filter(weight, phase, groups).reshape(grouped));
  }
  sizes[0] = groups * stacked * (g.in_channels / groups);
  sizes.erase(sizes.begin() + 1, sizes.begin() + 3);
  return filter.reshape(sizes);
}

}  // namespace

at::Tensor phase_stacked_grad_input(const Plan& plan, const at::Tensor& grad_output,
                                    const at::Tensor& weight, const ConvParams& params,
                                    at::MemoryFormat format) {
  const ConvGeometry& g = plan.geometry;
  const StackedGeometry& sg = plan.stacked;
  const int dims = g.spatial_dims;
  const int64_t groups = params.groups, per_group = g.in_channels / groups;
  const int64_t stacked = static_cast<int64_t>(sg.stacked_phases.size());

  std::vector<int64_t> padding(dims), dilation(dims), ones(dims, 1), zeros(dims, 0);
  for (int i = 0; i < dims; ++i) {
    padding[i] = sg.dims[i].padding;
    dilation[i] = sg.dims[i].sub_dilation;
  }
  at::Tensor out = at::convolution(grad_output, stacked_filter(plan, weight, groups),
                                   std::nullopt, ones, padding, dilation, /*transposed=*/false,
                                   zeros, groups);

  // Every phase's rows q in [0, Q): the stacked output, cropped or zero-extended
  // to Q rows, and zeros for the empty phases.
  std::vector<int64_t> phase_sizes{g.batch, groups, static_cast<int64_t>(plan.phases.size()),
                                   per_group};
  std::vector<int64_t> out_sizes{g.batch, groups, stacked, per_group};
  for (int i = 0; i < dims; ++i) {
    phase_sizes.push_back(sg.dims[i].rows);
    out_sizes.push_back(sg.dims[i].output);
  }
  at::Tensor rows = at::zeros(phase_sizes, grad_output.options());
  at::Tensor target = rows;
  at::Tensor source = out.reshape(out_sizes);
  for (int i = 0; i < dims; ++i) {
    const int64_t kept = std::min(sg.dims[i].rows, sg.dims[i].output);
    target = target.slice(i + 4, 0, kept);
    source = source.slice(i + 4, 0, kept);
  }
  const auto index = at::tensor(sg.stacked_phases, grad_output.options().dtype(at::kLong));
  target.index_copy_(2, index, source);

  // Interleave: E[s*q + r] = phase r's row q, i.e. view the phase index as
  // (r_0, ..., r_{d-1}) and move each r_i next to its q_i.
  std::vector<int64_t> split{g.batch, groups};
  for (int i = 0; i < dims; ++i) split.push_back(g.stride[i]);
  split.push_back(per_group);
  for (int i = 0; i < dims; ++i) split.push_back(sg.dims[i].rows);
  std::vector<int64_t> order{0, 1, dims + 2};
  std::vector<int64_t> expanded{g.batch, g.in_channels};
  for (int i = 0; i < dims; ++i) {
    order.push_back(dims + 3 + i);  // q_i
    order.push_back(2 + i);         // r_i
    expanded.push_back(sg.dims[i].rows * g.stride[i]);
  }
  at::Tensor dx = rows.reshape(split).permute(order).reshape(expanded);
  // Crop: dx[i] = E[i + p].
  for (int i = 0; i < dims; ++i) dx = dx.slice(i + 2, g.padding[i], g.padding[i] + g.input[i]);
  return dx.contiguous(format);
}

}  // namespace bwdconv::ops
