// The device launchers of a build without GPU kernels (no nvcc or hipcc, or
// BWDCONV_FORCE_CPU=1): each reports that a GPU tensor needs a kernel this
// build does not have. setup.py compiles this file instead of the .cu sources.
#include "hip/interleave.h"
#include "hip/relayout.h"
#include "hip/scatter.h"
#include "hip/splitk.h"

namespace bwdconv::hip {
namespace {

constexpr LaunchError kNoDeviceKernels =
    "bwdconv was built without its GPU kernels, which GPU tensors need (rebuild with nvcc or "
    "hipcc available)";

}  // namespace

template <>
LaunchError launch_scatter<Target::device>(const ScatterParams&, NativeStream) {
  return kNoDeviceKernels;
}

template <>
LaunchError launch_interleave<Target::device>(const InterleaveParams&, NativeStream) {
  return kNoDeviceKernels;
}

template <>
LaunchError launch_relayout<Target::device>(const RelayoutParams&, NativeStream) {
  return kNoDeviceKernels;
}

template <>
LaunchError launch_splitk_reduce<Target::device>(const SplitKParams&, NativeStream) {
  return kNoDeviceKernels;
}

template <>
int64_t splitk_units<Target::device>(int) {
  return 0;
}

}  // namespace bwdconv::hip
