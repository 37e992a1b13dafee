// relayout's conversion between NCHW (NCDHW) and channels_last: a batch of
// matrix transposes through shared memory, each side read and written in
// coalesced runs (docs/DESIGN.md, "relayout").
#pragma once

#include "params.h"
#include "portability.h"

namespace bwdconv::hip {

// Runs the transpose on the device (enqueued on `stream`) or on the host
// grid (its host-target compilation, synchronously); returns the launch error, if any:
// on an element width other than 2, 4 or 8 bytes, or on negative sizes.
template <Target target>
LaunchError launch_relayout(const RelayoutParams& params, NativeStream stream);

}  // namespace bwdconv::hip
