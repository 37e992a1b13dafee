#include "ops/interleave.h"

#include <algorithm>

#include "hip/bits.h"
#include "hip/interleave_index.h"
#include "hip/launch.h"
#include "hip/layout.h"
#include "ops/kernels.h"
#ifdef BWDCONV_WITH_GPU_KERNELS
#include "hip/interleave.h"
#endif

namespace bwdconv::ops {
namespace {

const char* byte_pointer(const at::Tensor& t, int64_t channel_offset) {
  return static_cast<const char*>(t.const_data_ptr()) +
         channel_offset * t.stride(1) * static_cast<int64_t>(t.element_size());
}

// The launch for phases [first, first + count).
hip::InterleaveParams launch_params(at::Tensor& dx, const ConvGeometry& g,
                                    const std::vector<PhaseInput>& phases, ChannelMap channels,
                                    int first, int count) {
  hip::InterleaveParams p;
  p.dst = dx.mutable_data_ptr();
  p.dst_view = kernel_view(dx);
  for (int i = 0; i < g.spatial_dims; ++i) {
    p.stride[i] = hip::make_step(g.stride[i]);
    p.padding[i] = g.padding[i];
  }
  p.channels_per_group = hip::make_step(channels.per_group);
  p.first_phase = first;
  p.phase_count = count;
  p.element_bytes = static_cast<int>(dx.element_size());
  for (int e = 0; e < count; ++e) {
    const PhaseInput& in = phases[first + e];
    hip::PhaseSource& source = p.phases[e];
    source.write = in.write;
    if (in.write != hip::PhaseWrite::Copy) continue;
    source.data = byte_pointer(in.result, in.channel_offset);
    for (int d = 0; d < in.result.dim(); ++d) source.strides[d] = in.result.stride(d);
    for (int i = 0; i < g.spatial_dims; ++i) source.extent[i] = in.result.size(i + 2);
    p.group_stride = channels.group_step * in.result.stride(1);
  }
  return p;
}

// Moves k channels per element when every tensor keeps its channels
// contiguous and the sizes, strides and addresses allow it.
void pack_channels(hip::InterleaveParams& p) {
  if (p.dst_view.strides[1] != 1) return;
  std::vector<int64_t> multiples{p.dst_view.sizes[1], p.channels_per_group.value, p.group_stride};
  std::vector<uintptr_t> addresses{reinterpret_cast<uintptr_t>(p.dst)};
  for (int d = 0; d < p.dst_view.dims; ++d) {
    if (d != 1) multiples.push_back(p.dst_view.strides[d]);
  }
  for (int e = 0; e < p.phase_count; ++e) {
    const hip::PhaseSource& s = p.phases[e];
    if (s.write != hip::PhaseWrite::Copy) continue;
    if (s.strides[1] != 1) return;
    addresses.push_back(reinterpret_cast<uintptr_t>(s.data));
    for (int d = 0; d < p.dst_view.dims; ++d) {
      if (d != 1) multiples.push_back(s.strides[d]);
    }
  }
  const int64_t k = hip::packet_elements(p.element_bytes, multiples, addresses);
  if (k == 1) return;
  hip::widen_channels(p.dst_view, k);
  for (int e = 0; e < p.phase_count; ++e) hip::widen_strides(p.phases[e].strides, p.dst_view.dims, k);
  p.channels_per_group = hip::make_step(p.channels_per_group.value / k);
  p.group_stride /= k;
  p.element_bytes *= static_cast<int>(k);
}

template <typename Bits, typename Index>
void interleave_on_cpu(const hip::InterleaveParams& p) {
  Bits* dst = static_cast<Bits*>(p.dst);
  for_each_element<Index>(p.dst_view, [&](const int64_t* coords, int64_t offset) {
    const hip::InterleaveSource source = hip::interleave_source<Index>(p, coords);
    if (source.write == hip::PhaseWrite::Copy) {
      dst[offset] = static_cast<const Bits*>(p.phases[source.entry].data)[source.offset];
    } else if (source.write == hip::PhaseWrite::Zero) {
      dst[offset] = Bits{};
    }
  });
}

void run(const hip::InterleaveParams& p, bool on_gpu) {
  if (on_gpu) {
    require_gpu_kernels("interleave");
#ifdef BWDCONV_WITH_GPU_KERNELS
    check_launch(hip::launch_interleave(p, current_stream()), "interleave");
#endif
    return;
  }
  const bool narrow = hip::interleave_divides_narrow(p);
  const bool known = hip::visit_walk(p.element_bytes, narrow, [&](auto bits, auto index) {
    interleave_on_cpu<decltype(bits), decltype(index)>(p);
  });
  TORCH_CHECK(known, "bwdconv interleave: unsupported element size ", p.element_bytes);
}

}  // namespace

void interleave(at::Tensor& dx, const ConvGeometry& geometry,
                const std::vector<PhaseInput>& phases, ChannelMap channels) {
  if (dx.numel() == 0) return;
  const int total = static_cast<int>(phases.size());
  for (int first = 0; first < total; first += hip::kMaxPhasesPerLaunch) {
    const int count = std::min(hip::kMaxPhasesPerLaunch, total - first);
    hip::InterleaveParams p = launch_params(dx, geometry, phases, channels, first, count);
    pack_channels(p);
    run(p, dx.is_cuda());
  }
}

}  // namespace bwdconv::ops
