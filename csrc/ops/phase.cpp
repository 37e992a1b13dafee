#include "ops/precompiled.h"  // first, as the precompiled header must be

#include "ops/phase.h"

#include <vector>

#include "ops/aten.h"
#include "ops/filter.h"
#include "ops/kernels.h"

namespace bwdconv::ops {
namespace {

// out[q] of the phase's stride-1 sub-convolution (docs/DESIGN.md, "Geometry").
at::Tensor phase_result(const Phase& phase, const at::Tensor& grad_output,
                        const at::Tensor& weight, int64_t groups) {
  const int dims = phase.spatial_dims;
  std::vector<int64_t> padding(dims), dilation(dims);
  for (int i = 0; i < dims; ++i) {
    padding[i] = phase.dims[i].conv_padding;
    dilation[i] = phase.dims[i].sub_dilation;
  }
  return stride1_convolution(grad_output, phase_adjoint_filter(weight, phase, groups), padding,
                             dilation, groups);
}

}  // namespace

at::Tensor phase_grad_input(const Plan& plan, const at::Tensor& grad_output,
                            const at::Tensor& weight, at::MemoryFormat format) {
  at::Tensor dx = empty_input_gradient(plan, grad_output, format);
  // Empty phases and phases without slots launch nothing and stay Zero.
  std::vector<PhaseInput> inputs(plan.phases.size());
  for (size_t r = 0; r < plan.phases.size(); ++r) {
    const Phase& phase = plan.phases[r];
    if (phase.empty() || phase.has_no_slots()) continue;
    inputs[r].write = hip::PhaseWrite::Copy;
    inputs[r].result = phase_result(phase, grad_output, weight, plan.geometry.groups);
  }
  interleave(dx, plan, inputs, ChannelMap{plan.geometry.in_channels, 0});
  return dx;
}

}  // namespace bwdconv::ops
