// splitk: the weight gradient as tiles of (out channels x in channels * taps),
// each block reducing one chunk of (batch x output space) into fp32 partials,
// then a deterministic reduce-and-cast (no float atomics: the same bits on
// every run).
#pragma once

#include "params.h"
#include "portability.h"

namespace bwdconv::hip {

#ifdef BWDCONV_GPU_RUNTIME
// Enqueues both kernels on `stream`; returns the first launch error, if any.
GpuError launch_splitk(const SplitKParams& params, GpuStream stream);
#endif

}  // namespace bwdconv::hip
