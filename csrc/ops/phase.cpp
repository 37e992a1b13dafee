#include "ops/phase.h"

#include <vector>

#include "ops/filter.h"

namespace bwdconv::ops {
namespace {

// dx positions s*q + r - p for q in [q_begin, q_end), as a strided view.
at::Tensor phase_slots(const at::Tensor& dx, const Phase& phase) {
  at::Tensor view = dx;
  for (int i = 0; i < phase.spatial_dims; ++i) {
    const PhaseDim& pd = phase.dims[i];
    const int64_t last = pd.dst_offset + (pd.slots() - 1) * pd.dst_stride;
    view = view.slice(i + 2, pd.dst_offset, last + 1, pd.dst_stride);
  }
  return view;
}

bool computes_every_slot(const Phase& phase) {
  for (int i = 0; i < phase.spatial_dims; ++i) {
    if (phase.dims[i].computed() != phase.dims[i].slots()) return false;
  }
  return true;
}

}  // namespace

void write_phase(at::Tensor& dx, const Phase& phase, const at::Tensor& computed) {
  if (phase.has_no_slots()) return;
  at::Tensor slots = phase_slots(dx, phase);
  if (phase.empty() || !computed.defined()) {
    slots.zero_();
    return;
  }
  at::Tensor source = computed;
  at::Tensor target = slots;
  for (int i = 0; i < phase.spatial_dims; ++i) {
    const PhaseDim& pd = phase.dims[i];
    source = source.slice(i + 2, pd.q_begin, pd.computed_end);
    target = target.slice(i + 2, 0, pd.computed());
  }
  if (!computes_every_slot(phase)) slots.zero_();  // the out-of-range tail stays zero
  target.copy_(source);
}

at::Tensor phase_grad_input(const Plan& plan, const at::Tensor& grad_output,
                            const at::Tensor& weight, at::IntArrayRef input_sizes,
                            const ConvParams& params, at::MemoryFormat format) {
  at::Tensor dx = at::empty(input_sizes, grad_output.options().memory_format(format));
  const int dims = plan.geometry.spatial_dims;
  for (const Phase& phase : plan.phases) {
    if (phase.has_no_slots()) continue;
    at::Tensor computed;
    if (!phase.empty()) {
      std::vector<int64_t> padding(dims), dilation(dims), ones(dims, 1), zeros(dims, 0);
      for (int i = 0; i < dims; ++i) {
        padding[i] = phase.dims[i].conv_padding;
        dilation[i] = phase.dims[i].sub_dilation;
      }
      computed = at::convolution(grad_output, phase_adjoint_filter(weight, phase, params.groups),
                                 std::nullopt, ones, padding, dilation, /*transposed=*/false,
                                 zeros, params.groups);
    }
    write_phase(dx, phase, computed);
  }
  return dx;
}

}  // namespace bwdconv::ops
