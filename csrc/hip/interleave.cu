#include "interleave.h"

#include "bits.h"
#include "interleave_index.h"
#include "launch.h"

namespace bwdconv::hip {
namespace {

// One thread per dx element (grid-stride, dx walked in memory order).
template <typename Bits, typename Index>
__global__ void __launch_bounds__(kThreadsPerBlock)
    interleave_kernel(InterleaveParams p, int64_t total) {
  Bits* dst = static_cast<Bits*>(p.dst);
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t linear = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       linear < total; linear += step) {
    int64_t coords[kMaxTensorDims];
    const int64_t dst_offset = unravel_offset<Index>(linear, p.dst_view, coords);
    const InterleaveSource source = interleave_source<Index>(p, coords);
    if (source.write == PhaseWrite::Copy) {
      const Bits* src = static_cast<const Bits*>(p.phases[source.entry].data);
      global_store(dst + dst_offset, global_load(src + source.offset));
    } else if (source.write == PhaseWrite::Zero) {
      global_store(dst + dst_offset, Bits{});
    }
  }
}

}  // namespace

template <Target target>
LaunchError launch_interleave(const InterleaveParams& params, NativeStream stream) {
  const int64_t total = element_count(params.dst_view);
  if (total == 0) return nullptr;
  const bool narrow = interleave_divides_narrow(params);
  const bool known = visit_walk(params.element_bytes, narrow, [&](auto bits, auto index) {
    launch_kernel({"interleave"}, interleave_kernel<decltype(bits), decltype(index)>,
                  blocks_for(total), kThreadsPerBlock, stream, params, total);
  });
  return known ? last_launch_error() : kInvalidLaunch;
}

template LaunchError launch_interleave<BWDCONV_KERNEL_TARGET>(const InterleaveParams&,
                                                              NativeStream);

}  // namespace bwdconv::hip
