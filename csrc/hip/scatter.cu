#include "scatter.h"

#include "bits.h"
#include "launch.h"
#include "scatter_index.h"

namespace bwdconv::hip {
namespace {

// One thread per dst element (grid-stride, dst walked in memory order).
template <typename Bits, typename Index>
__global__ void __launch_bounds__(kThreadsPerBlock)
    scatter_kernel(ScatterParams p, int64_t total) {
  const Bits* src = static_cast<const Bits*>(p.src);
  Bits* dst = static_cast<Bits*>(p.dst);
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t linear = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       linear < total; linear += step) {
    int64_t coords[kMaxTensorDims];
    const int64_t dst_offset = unravel_offset<Index>(linear, p.dst_view, coords);
    const int64_t src_offset = scatter_source_offset<Index>(p, coords);
    global_store(dst + dst_offset, src_offset >= 0 ? global_load(src + src_offset) : Bits{});
  }
}

}  // namespace

template <Target target>
LaunchError launch_scatter(const ScatterParams& params, NativeStream stream) {
  const int64_t total = element_count(params.dst_view);
  if (total == 0) return nullptr;
  const bool narrow = scatter_divides_narrow(params);
  const bool known = visit_walk(params.element_bytes, narrow, [&](auto bits, auto index) {
    launch_kernel({"scatter"}, scatter_kernel<decltype(bits), decltype(index)>, blocks_for(total),
                  kThreadsPerBlock, stream, params, total);
  });
  return known ? last_launch_error() : kInvalidLaunch;
}

template LaunchError launch_scatter<BWDCONV_KERNEL_TARGET>(const ScatterParams&, NativeStream);

}  // namespace bwdconv::hip
