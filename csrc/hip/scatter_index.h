// Index math of the scatter kernel (a row walk, params.h "ScatterParams"),
// shared with its unit tests.
#pragma once

#include <cstdint>

#include "index.h"

namespace bwdconv::hip {

// Positions and row indices of a scatter walk stay below 2^31
// (make_scatter_walk): they divide narrow; only element offsets may need
// 64 bits.
using Position = int32_t;

BWDCONV_HOST_DEVICE inline Position divide_position(Position value, const Divisor& divisor) {
  const uint32_t v = static_cast<uint32_t>(value);
  return static_cast<Position>((multiply_high(v, divisor.magic) + v) >> divisor.shift);
}

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

// A dst position along the row and its source position o and remainder r:
// first - lead = o * step + r with 0 <= r < step.
struct RowCursor {
  Position first, o, r;

  // Moves on by positions = quotient * step + remainder.
  BWDCONV_HOST_DEVICE void advance(Position positions, Position quotient, Position remainder,
                                   Position step) {
    first += positions;
    o += quotient;
    r += remainder;
    const bool carry = r >= step;
    r = carry ? r - step : r;
    o += carry;
  }
};

// The cursor at `first` (first - lead + row_bias >= 0): one division.
BWDCONV_HOST_DEVICE inline RowCursor row_cursor(Position first, const ScatterParams& p) {
  const Position biased = first - p.row.lead + static_cast<Position>(p.row_bias);
  const Position o = divide_position(biased, p.row.step);
  return {first, o - static_cast<Position>(p.row_bias_quotient),
          biased - o * static_cast<Position>(p.row.step.value)};
}

}  // namespace bwdconv::hip
