// interleave: one pass that writes dx from the phases' sub-convolution
// results: every slot of the launch's phases written once, values and zeros
// alike (phase, phase_stacked and swap1x1 share it).
#pragma once

#include "params.h"
#include "portability.h"

namespace bwdconv::hip {

// Runs the pass on the device (enqueued on `stream`) or on the host grid
// (its host-target compilation, synchronously); returns the launch error, if any.
template <Target target>
LaunchError launch_interleave(const InterleaveParams& params, NativeStream stream);

}  // namespace bwdconv::hip
