// splitk's kernel: the deterministic reduce-and-cast of the per-chunk
// partials that the vendor GEMM wrote (csrc/ops/splitk.cpp): no float
// atomics, the chunks added in order, the same bits on every run.
#pragma once

#include <cstdint>

#include "params.h"
#include "portability.h"

namespace bwdconv::hip {

// Runs the reduce on the device (enqueued on `stream`) or on the host grid
// (its host-target compilation, synchronously); returns the launch error, if any.
template <Target target>
LaunchError launch_splitk_reduce(const SplitKParams& params, NativeStream stream);

// The units the chunks are counted for: the SMs (CUs) of GPU `device`, or
// the host's hardware threads; 0 when the runtime cannot tell.
template <Target target>
int64_t splitk_units(int device);

}  // namespace bwdconv::hip
