// relayout: an NCHW (NCDHW) gradient computed by aten in channels_last, its
// operands converted there and the result converted back (docs/DESIGN.md,
// "relayout"): where the backend's channels_last path is enough faster to
// pay for the conversions (cuDNN's NCHW transposed and strided kernels).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "phase.h"

namespace bwdconv {

// Why relayout cannot serve the geometry (already channels_last, 1D with no
// channels_last layout, or 3D bfloat16 on the CPU), or nothing when it can.
std::optional<std::string> relayout_refusal(const ConvGeometry& geometry,
                                            const std::vector<Phase>& phases);

}  // namespace bwdconv
