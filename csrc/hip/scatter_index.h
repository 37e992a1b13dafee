// Index math of the scatter kernel (a row walk, params.h "ScatterParams"),
// shared with its unit tests.
#pragma once

#include <cstdint>

#include "row_index.h"

namespace bwdconv::hip {

// Source position of dst position j along `dim`; clears *live (and returns 0)
// where j holds a zero.
BWDCONV_HOST_DEVICE inline Position source_position(Position j, const ScatterWalkDim& dim,
                                                    bool* live) {
  const Position shifted = j - dim.lead;
  const Position o = divide_position(shifted, dim.step);
  const bool holds = shifted >= 0 && o * static_cast<Position>(dim.step.value) == shifted &&
                     o < dim.src_size;
  *live = *live && holds;
  return holds ? o : 0;
}

}  // namespace bwdconv::hip
