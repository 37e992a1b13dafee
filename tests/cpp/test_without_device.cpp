// A build without GPU kernels compiles each kernel source for the host target
// alone, and the same line that instantiates a launcher there defines its
// device launcher, which says the kernels are missing
// (BWDCONV_TARGET_FUNCTION, csrc/hip/portability.h). CMake's host-target
// library is such a build (no BWDCONV_WITH_GPU_KERNELS).
#include <gtest/gtest.h>

#include "hip/interleave.h"
#include "hip/relayout.h"
#include "hip/scatter.h"

namespace bwdconv::hip {
namespace {

TEST(WithoutDevice, EveryDeviceLauncherSaysItsKernelsAreMissing) {
  EXPECT_STREQ(launch_interleave<Target::device>(InterleaveParams{}, nullptr), kNoDeviceKernels);
  EXPECT_STREQ(launch_relayout<Target::device>(RelayoutParams{}, nullptr), kNoDeviceKernels);
  EXPECT_STREQ(launch_scatter<Target::device>(ScatterParams{}, nullptr), kNoDeviceKernels);
}

}  // namespace
}  // namespace bwdconv::hip
