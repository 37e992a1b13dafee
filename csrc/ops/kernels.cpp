#include "ops/precompiled.h"  // first, as the precompiled header must be

#include "ops/kernels.h"

#include <algorithm>
#include <atomic>

#include "hip/interleave.h"
#include "hip/layout.h"
#include "ops/geometry.h"

#if defined(BWDCONV_WITH_GPU_KERNELS)
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGraphsC10Utils.h>
#endif

namespace bwdconv::ops {

hip::TensorView kernel_view(const at::Tensor& t) {
  hip::TensorView view;
  view.dims = static_cast<int>(t.dim());
  for (int d = 0; d < view.dims; ++d) {
    view.sizes[d] = t.size(d);
    view.strides[d] = t.stride(d);
  }
  return view;
}

namespace {

std::atomic<bool> on_host_grid{false};

}  // namespace

bool kernels_on_host() { return on_host_grid.load(); }

void set_kernels_on_host(bool on_host) { on_host_grid = on_host; }

bool runs_kernels(const at::Tensor& t) { return !t.is_cpu() || kernels_on_host(); }

hip::NativeStream current_stream(const at::Tensor& t) {
#if defined(BWDCONV_WITH_GPU_KERNELS)
  // Every supported torch has this getter (c10::Stream::native_handle, the
  // device-generic route, is missing from older ones); in a ROCm build
  // torch's hipify turns it into HIP's, whose stream() is the hipStream_t.
  return at::cuda::getCurrentCUDAStream(t.device().index()).stream();
#else
  // No device launcher of this build takes a stream: each reports that the
  // kernels are missing (BWDCONV_TARGET_FUNCTION, csrc/hip/portability.h).
  static_cast<void>(t);
  return nullptr;
#endif
}

bool stream_capturing(const at::Tensor& t) {
  if (t.is_cpu()) return false;
#if defined(BWDCONV_WITH_GPU_KERNELS)
  const c10::DeviceGuard on_device(t.device());
  return c10::cuda::currentStreamCaptureStatusMayInitCtx() != c10::cuda::CaptureStatus::None;
#else
  return true;
#endif
}

void check_launch(hip::LaunchError error, const char* kernel) {
  TORCH_CHECK(error == nullptr, "bwdconv ", kernel, " kernel: ", error);
}

namespace {

const char* byte_pointer(const at::Tensor& t, int64_t channel_offset) {
  return static_cast<const char*>(t.const_data_ptr()) +
         channel_offset * t.stride(1) * static_cast<int64_t>(t.element_size());
}

// The kernel's row walk for phases [first, first + count) (hip/layout.h,
// make_interleave_walk); false where dx's positions pass the walk's 32 bits.
bool launch_params(at::Tensor& dx, const ConvGeometry& g, const std::vector<PhaseInput>& phases,
                   ChannelMap channels, int first, int count, hip::InterleaveParams* p) {
  hip::InterleaveLaunch l;
  l.dst = dx.mutable_data_ptr();
  l.dst_view = kernel_view(dx);
  for (int i = 0; i < g.spatial_dims; ++i) {
    l.stride[i] = g.stride[i];
    l.padding[i] = g.padding[i];
  }
  l.channels_per_group = channels.per_group;
  l.first_phase = first;
  l.phase_count = count;
  l.element_bytes = static_cast<int>(dx.element_size());
  l.wide_offsets = wide_offsets_for_tests();
  for (int e = 0; e < count; ++e) {
    const PhaseInput& in = phases[first + e];
    hip::PhaseResult& result = l.phases[e];
    result.write = in.write;
    if (in.write != hip::PhaseWrite::Copy) continue;
    result.data = byte_pointer(in.result, in.channel_offset);
    for (int d = 0; d < in.result.dim(); ++d) {
      result.sizes[d] = in.result.size(d);
      result.strides[d] = in.result.stride(d);
    }
    l.group_stride = channels.group_step * in.result.stride(1);
  }
  return hip::make_interleave_walk(l, p);
}

// The parameters of each launch, up to 32 phases each; empty where some
// launch's walk cannot be made (then no launch runs).
std::vector<hip::InterleaveParams> kernel_launches(at::Tensor& dx, const ConvGeometry& geometry,
                                                   const std::vector<PhaseInput>& phases,
                                                   ChannelMap channels) {
  const int total = static_cast<int>(phases.size());
  std::vector<hip::InterleaveParams> launches;
  for (int first = 0; first < total; first += hip::kMaxPhasesPerLaunch) {
    const int count = std::min(hip::kMaxPhasesPerLaunch, total - first);
    launches.emplace_back();
    if (!launch_params(dx, geometry, phases, channels, first, count, &launches.back())) {
      return {};
    }
  }
  return launches;
}

// A phase result as [N, groups, per_group, q...]: dx channel g * per_group + j
// reads its channel g * group_step + j (+ the phase's channel offset).
at::Tensor grouped_result(const PhaseInput& in, ChannelMap channels, int64_t groups) {
  const at::Tensor& r = in.result;
  std::vector<int64_t> sizes{r.size(0), groups, channels.per_group};
  std::vector<int64_t> strides{r.stride(0), channels.group_step * r.stride(1), r.stride(1)};
  for (int64_t d = 2; d < r.dim(); ++d) {
    sizes.push_back(r.size(d));
    strides.push_back(r.stride(d));
  }
  return r.as_strided(sizes, strides, r.storage_offset() + in.channel_offset * r.stride(1));
}

// How many of the phase's slots along dim i its result reaches: those from
// q_begin inside the result's extent; the slots past it are zeros.
int64_t slots_inside(const PhaseDim& dim, const PhaseInput& in, int i) {
  return std::clamp<int64_t>(in.result.size(2 + i) - dim.q_begin, 0, dim.slots());
}

// The phase's slots of dx (viewed [N, groups, per_group, I...]): its result
// where it has one, zeros elsewhere (left as they are where dx `zeroed`
// already holds them); each slot written once. Along each dim the slots are
// q in [q_begin, q_end) at dx positions dst_offset + s*(q - q_begin).
void write_phase_slots(at::Tensor& grouped_dx, const Phase& phase, const PhaseInput& in,
                       ChannelMap channels, bool zeroed) {
  if (in.write == hip::PhaseWrite::Zero && zeroed) return;
  at::Tensor slots = grouped_dx;
  const PhaseDim* dims = phase.dims.data();
  for (int i = 0; i < phase.spatial_dims; ++i) {
    const int64_t first = dims[i].slots() > 0 ? dims[i].dst_offset : 0;
    slots = slots.slice(3 + i, first, first + dims[i].slots() * dims[i].dst_stride,
                        dims[i].dst_stride);
  }
  if (in.write == hip::PhaseWrite::Zero) {
    slots.zero_();
    return;
  }
  // Slots q0 + k at or past the result's extent are zeros: zero them dim by
  // dim (the box beyond the extent in dim i, within it in the dims before),
  // then copy the box inside.
  at::Tensor result = grouped_result(in, channels, grouped_dx.size(1));
  for (int i = 0; i < phase.spatial_dims; ++i) {
    const int64_t count = dims[i].slots();
    const int64_t inside = slots_inside(dims[i], in, i);
    if (inside < count && !zeroed) slots.narrow(3 + i, inside, count - inside).zero_();
    if (inside == 0) return;
    slots = slots.narrow(3 + i, 0, inside);
    result = result.narrow(3 + i, dims[i].q_begin, inside);
  }
  slots.copy_(result);
}

// How many of a channel's dx positions take a copied value: the slots of
// the phases with a result, inside its extent.
int64_t copied_positions(const Plan& plan, const std::vector<PhaseInput>& phases) {
  int64_t copied = 0;
  for (size_t r = 0; r < phases.size(); ++r) {
    if (phases[r].write != hip::PhaseWrite::Copy) continue;
    int64_t box = 1;
    for (int i = 0; i < plan.phases[r].spatial_dims; ++i) {
      box *= slots_inside(plan.phases[r].dims[i], phases[r], i);
    }
    copied += box;
  }
  return copied;
}

// Whether to zero all of dx in one pass first: where zeros fill at least half
// of it (swap1x1's 1x1 filter at stride s: 1 - 1/s^d) and no phase was
// written in place before. One dense fill (a memset for a dense dx) then
// replaces a strided fill per empty phase, each of which walks every row of
// dx it has slots in, and each an ATen call of its own (15 of them at 4x4).
bool zero_first(const at::Tensor& dx, const Plan& plan, const std::vector<PhaseInput>& phases) {
  for (const PhaseInput& in : phases) {
    if (in.write == hip::PhaseWrite::Keep) return false;
  }
  const int64_t positions = dx.numel() / (dx.size(0) * dx.size(1));
  return 2 * copied_positions(plan, phases) <= positions;
}

// Strided ATen copies write each phase's slots: the formula itself,
// vectorised and threaded by ATen. On the CPU, and on a GPU for a dx whose
// positions pass the kernel's 32 bits (tensors as large as aten takes).
void interleave_with_copies(at::Tensor& dx, const Plan& plan,
                            const std::vector<PhaseInput>& phases, ChannelMap channels) {
  const int64_t groups = dx.size(1) / channels.per_group;
  at::Tensor grouped_dx = dx.unflatten(1, {groups, channels.per_group});
  const bool zeroed = zero_first(dx, plan, phases);
  if (zeroed) dx.zero_();
  for (size_t r = 0; r < phases.size(); ++r) {
    if (phases[r].write == hip::PhaseWrite::Keep) continue;
    write_phase_slots(grouped_dx, plan.phases[r], phases[r], channels, zeroed);
  }
}

}  // namespace

at::Tensor empty_input_gradient(const Plan& plan, const at::Tensor& grad_output,
                                at::MemoryFormat format) {
  return at::empty(input_sizes(plan.geometry), grad_output.options().memory_format(format));
}

void interleave(at::Tensor& dx, const Plan& plan, const std::vector<PhaseInput>& phases,
                ChannelMap channels) {
  if (dx.numel() == 0) return;
  const std::vector<hip::InterleaveParams> launches =
      runs_kernels(dx) ? kernel_launches(dx, plan.geometry, phases, channels)
                       : std::vector<hip::InterleaveParams>{};
  if (launches.empty()) {
    interleave_with_copies(dx, plan, phases, channels);
    return;
  }
  for (const hip::InterleaveParams& p : launches) {
    run_kernel("interleave", dx, [&](auto target, hip::NativeStream stream) {
      return hip::launch_interleave<decltype(target)::value>(p, stream);
    });
  }
}

}  // namespace bwdconv::ops
