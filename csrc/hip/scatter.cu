#include "scatter.h"

#include "scatter_index.h"

namespace bwdconv::hip {
namespace {

constexpr int kThreadsPerBlock = 256;  // a multiple of both warp (32) and wavefront (64)
constexpr int64_t kMaxBlocks = 65535;

int64_t element_count(const TensorView& view) {
  int64_t count = 1;
  for (int d = 0; d < view.dims; ++d) count *= view.sizes[d];
  return count;
}

// One thread per dst element (grid-stride); Bits is an unsigned integer as wide
// as the element, since scatter only moves bits.
template <typename Bits>
__global__ void scatter_kernel(ScatterParams p, int64_t total) {
  const Bits* src = static_cast<const Bits*>(p.src);
  Bits* dst = static_cast<Bits*>(p.dst);
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t linear = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       linear < total; linear += step) {
    int64_t coords[kMaxTensorDims];
    const int64_t dst_offset = unravel_offset(linear, p.dst_view, coords);
    const int64_t src_offset = scatter_source_offset(p, coords);
    dst[dst_offset] = src_offset >= 0 ? src[src_offset] : Bits{0};
  }
}

template <typename Bits>
GpuError launch_for(const ScatterParams& params, GpuStream stream) {
  const int64_t total = element_count(params.dst_view);
  if (total == 0) return kGpuSuccess;
  int64_t blocks = (total + kThreadsPerBlock - 1) / kThreadsPerBlock;
  if (blocks > kMaxBlocks) blocks = kMaxBlocks;
  scatter_kernel<Bits><<<static_cast<unsigned>(blocks), kThreadsPerBlock, 0, stream>>>(
      params, total);
  return gpu_last_error();
}

}  // namespace

GpuError launch_scatter(const ScatterParams& params, GpuStream stream) {
  switch (params.element_bytes) {
    case 2: return launch_for<uint16_t>(params, stream);
    case 4: return launch_for<uint32_t>(params, stream);
    case 8: return launch_for<uint64_t>(params, stream);
  }
  return kGpuInvalidValue;  // reported by the caller like any launch failure
}

}  // namespace bwdconv::hip
