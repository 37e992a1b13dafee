// Index math of the row walks (scatter and interleave: params.h "RowWalk"),
// shared with their unit tests: one division per row and per chunk start,
// additions along the row.
#pragma once

#include <cstdint>

#include "index.h"

namespace bwdconv::hip {

// Positions and row indices of a row walk stay below 2^31 (make_scatter_walk,
// make_interleave_walk): they divide narrow; only element offsets may need
// 64 bits.
using Position = int32_t;

BWDCONV_HOST_DEVICE inline Position divide_position(Position value, const Divisor& divisor) {
  const uint32_t v = static_cast<uint32_t>(value);
  return static_cast<Position>((multiply_high(v, divisor.magic) + v) >> divisor.shift);
}

// A move along a row by `positions` = quotient * step + remainder, with
// 0 <= remainder < step.
struct RowMove {
  Position positions, quotient, remainder;
};

// The move by `positions` (>= 0): a fixed step (kStep 1, 2) divides at
// compile time, any other (kStep 0) by `step`.
template <int kStep>
BWDCONV_HOST_DEVICE inline RowMove row_move(Position positions, const Divisor& step) {
  if constexpr (kStep > 0) {
    return {positions, positions / kStep, positions % kStep};
  } else {
    const Position quotient = divide_position(positions, step);
    return {positions, quotient, positions - quotient * static_cast<Position>(step.value)};
  }
}

// A position along the row and its source position o and remainder r:
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

  // Moves on by `move` (row_move).
  BWDCONV_HOST_DEVICE void advance(const RowMove& move, Position step) {
    advance(move.positions, move.quotient, move.remainder, step);
  }

  // Moves on by the walk's threads per row times a chunk.
  BWDCONV_HOST_DEVICE void advance(const RowWalk& walk, int lanes, Position step) {
    advance(lanes << walk.lane_shift, static_cast<Position>(walk.advance_quotient),
            static_cast<Position>(walk.advance_remainder), step);
  }
};

// The cursor at `first` (first - lead + walk.bias >= 0): one division, at
// compile time for a fixed step (kStep 1, 2; 0: any, by `step`).
template <int kStep = 0>
BWDCONV_HOST_DEVICE inline RowCursor row_cursor(Position first, Position lead, const Divisor& step,
                                                const RowWalk& walk) {
  const Position biased = first - lead + static_cast<Position>(walk.bias);
  const Position o = kStep > 0 ? biased / kStep : divide_position(biased, step);
  const Position size = kStep > 0 ? kStep : static_cast<Position>(step.value);
  return {first, o - static_cast<Position>(walk.bias_quotient), biased - o * size};
}

}  // namespace bwdconv::hip
