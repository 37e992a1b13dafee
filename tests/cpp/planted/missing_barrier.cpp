// A planted bug for the sanitizer checks (CMakeLists.txt): the test-only
// block_reverse kernel (tests/cpp/kernels/block_reverse.cu) without its
// barrier between writing the shared tile and reading it, so lanes read tile
// entries other lanes are still writing. Built with -fsanitize=thread, the
// run must report a data race; CTest checks that it does.
#define BWDCONV_HOST_TARGET 1
#include "hip/portability.h"

#undef __syncthreads
#define __syncthreads() ((void)0)
#include "kernels/block_reverse.cu"

#include <vector>

int main() {
  std::vector<float> in(2 * bwdconv::hip::kThreadsPerBlock, 1.0f), out(in.size());
  using bwdconv::hip::test_kernels::launch_block_reverse;
  return launch_block_reverse(in.data(), out.data(), static_cast<int64_t>(in.size())) == nullptr
             ? 0
             : 1;
}
