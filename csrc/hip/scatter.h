// scatter: one pass that writes every element of the zero-inserted, padded
// grad_output (values and zeros alike).
#pragma once

#include "params.h"
#include "portability.h"

namespace bwdconv::hip {

#ifdef BWDCONV_GPU_RUNTIME
// Enqueues the scatter on `stream`; returns the launch error, if any.
GpuError launch_scatter(const ScatterParams& params, GpuStream stream);
#endif

}  // namespace bwdconv::hip
