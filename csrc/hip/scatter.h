// scatter: one pass that writes every element of the zero-inserted, padded
// grad_output (values and zeros alike).
#pragma once

#include "params.h"
#include "portability.h"

namespace bwdconv::hip {

// Runs the scatter on the device (enqueued on `stream`) or on the host grid
// (its host-target compilation, synchronously); returns the launch error, if any.
template <Target target>
LaunchError launch_scatter(const ScatterParams& params, NativeStream stream);

}  // namespace bwdconv::hip
