#include "splitk.h"

#include "element.h"
#include "launch.h"

namespace bwdconv::hip {
namespace {

// grad_weight[e] = partials[0][e] + partials[1][e] + ..., in chunk order.
template <typename T, typename Acc>
__global__ void __launch_bounds__(kThreadsPerBlock) splitk_reduce_kernel(SplitKParams p) {
  const Acc* partials = static_cast<const Acc*>(p.partials);
  T* grad_weight = static_cast<T*>(p.grad_weight);
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < p.elements;
       e += step) {
    Acc total = 0;
    for (int64_t chunk = 0; chunk < p.chunks; ++chunk) {
      total += global_load(partials + chunk * p.elements + e);
    }
    global_store(grad_weight + e, FromAccumulator<T>::convert(total));
  }
}

template <typename T, typename Acc>
LaunchError launch_for(const SplitKParams& p, NativeStream stream) {
  if (p.elements == 0) return nullptr;
  if (p.chunks < 1) return kInvalidLaunch;
  launch_kernel({"splitk_reduce"}, splitk_reduce_kernel<T, Acc>, blocks_for(p.elements),
                kThreadsPerBlock, stream, p);
  return last_launch_error();
}

}  // namespace

template <Target target>
LaunchError launch_splitk_reduce(const SplitKParams& params, NativeStream stream) {
  switch (static_cast<ElementType>(params.element)) {
    case ElementType::Float32: return launch_for<float, float>(params, stream);
    case ElementType::Float64: return launch_for<double, double>(params, stream);
    case ElementType::Float16: return launch_for<Half, float>(params, stream);
    case ElementType::BFloat16: return launch_for<BFloat16, float>(params, stream);
  }
  return kInvalidLaunch;
}

template <Target target>
int64_t splitk_units(int device) {
  return multiprocessor_count(device);
}

BWDCONV_TARGET_FUNCTION(LaunchError, launch_splitk_reduce, kNoDeviceKernels, const SplitKParams&,
                        NativeStream);
BWDCONV_TARGET_FUNCTION(int64_t, splitk_units, 0, int);

}  // namespace bwdconv::hip
