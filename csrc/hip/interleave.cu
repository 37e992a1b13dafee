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
      dst[dst_offset] = static_cast<const Bits*>(p.phases[source.entry].data)[source.offset];
    } else if (source.write == PhaseWrite::Zero) {
      dst[dst_offset] = Bits{};
    }
  }
}

}  // namespace

GpuError launch_interleave(const InterleaveParams& params, GpuStream stream) {
  const int64_t total = element_count(params.dst_view);
  if (total == 0) return kGpuSuccess;
  const bool narrow = interleave_divides_narrow(params);
  const bool known = visit_walk(params.element_bytes, narrow, [&](auto bits, auto index) {
    interleave_kernel<decltype(bits), decltype(index)>
        <<<blocks_for(total), kThreadsPerBlock, 0, stream>>>(params, total);
  });
  return known ? gpu_last_error() : kGpuInvalidValue;
}

}  // namespace bwdconv::hip
