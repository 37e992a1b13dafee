// The test-only block_reverse kernel (tests/cpp/kernels/block_reverse.cu) on
// the host grid: its lanes run as concurrent threads meeting at a barrier.
#pragma once

#include <cstdint>

#include "hip/portability.h"

namespace bwdconv::hip::test_kernels {

LaunchError block_reverse_on_host(const float* in, float* out, int64_t n);

}  // namespace bwdconv::hip::test_kernels
