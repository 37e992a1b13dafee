// interleave: one pass that writes dx from the phases' sub-convolution
// results: every slot of the launch's phases written once, values and zeros
// alike (phase, phase_stacked and swap1x1 share it).
#pragma once

#include "params.h"
#include "portability.h"

namespace bwdconv::hip {

#ifdef BWDCONV_GPU_RUNTIME
// Enqueues the pass on `stream`; returns the launch error, if any.
GpuError launch_interleave(const InterleaveParams& params, GpuStream stream);
#endif

}  // namespace bwdconv::hip
