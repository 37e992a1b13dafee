// splitk: the weight gradient as tiles of (out channels x in channels * taps),
// each block reducing one chunk of (batch x output space) into fp32 partials,
// then a deterministic reduce-and-cast (no float atomics: the same bits on
// every run).
#pragma once

#include "params.h"
#include "portability.h"

namespace bwdconv::hip {

// Runs both kernels on the device (enqueued on `stream`) or on the host grid
// (csrc/hip/host/, synchronously); returns the launch error, if any.
template <Target target>
LaunchError launch_splitk(const SplitKParams& params, NativeStream stream);

}  // namespace bwdconv::hip
