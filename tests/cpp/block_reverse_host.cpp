// tests/cpp/kernels/block_reverse.cu compiled for the host target.
#define BWDCONV_HOST_TARGET 1
#include "kernels/block_reverse.cu"

#include "block_reverse.h"

namespace bwdconv::hip::test_kernels {

LaunchError block_reverse_on_host(const float* in, float* out, int64_t n) {
  return launch_block_reverse(in, out, n);
}

}  // namespace bwdconv::hip::test_kernels
