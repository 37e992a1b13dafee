// A test-only kernel that stages through shared memory, for the host grid's
// synchronized lanes and the ThreadSanitizer check: each block reverses its
// elements, every lane writing one into a __shared__ tile and, after the
// barrier, reading the one its mirror lane wrote. Without the barrier a lane
// can read the tile before its mirror has written it: a data race
// (tests/cpp/planted/missing_barrier.cpp). Included by host-target
// translation units only.
#include "hip/launch.h"
#include "hip/portability.h"

namespace bwdconv::hip::test_kernels {

// out[b*256 + i] = in[b*256 + 255 - i], elements past n read as 0.
__global__ void __launch_bounds__(kThreadsPerBlock)
    block_reverse_kernel(const float* in, float* out, int64_t n) {
  __shared__ float tile[kThreadsPerBlock];
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x;
  const int64_t i = first + threadIdx.x;
  tile[threadIdx.x] = i < n ? global_load(in + i) : 0.0f;
  __syncthreads();
  if (i < n) global_store(out + i, tile[blockDim.x - 1 - threadIdx.x]);
}

inline LaunchError launch_block_reverse(const float* in, float* out, int64_t n) {
  const int64_t blocks = (n + kThreadsPerBlock - 1) / kThreadsPerBlock;
  launch_kernel({"block_reverse", Lanes::synchronized}, block_reverse_kernel,
                dim3(static_cast<unsigned>(blocks)), dim3(kThreadsPerBlock), nullptr, in, out, n);
  return last_launch_error();
}

}  // namespace bwdconv::hip::test_kernels
