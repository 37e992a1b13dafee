// Index math of the interleave kernel (a row walk, params.h "InterleaveParams"),
// shared with its unit tests.
#pragma once

#include <cstdint>

#include "row_index.h"

namespace bwdconv::hip {

// A phase's entry in InterleaveParams::phases is kept as a byte offset into
// that array, so finding a phase costs an addition, not a multiply.
constexpr int kPhaseBytes = sizeof(PhaseSource);

// Where a row of dx starts: its element offset, the launch's entry of the
// row's phase at row residue 0 ((phase - first_phase) * kPhaseBytes), and the
// slot of every outer dim.
template <int kOuter, typename Index>
struct RowOrigin {
  Index dst_offset = 0;
  int entry = 0;
  Position slot[kOuter];
};

// dx position j of a dim is slot q = (j + p) div s of residue
// r = (j + p) mod s, since j = s*q + r - p (docs/DESIGN.md, "Geometry"): one
// division per outer dim for the coordinate, one for the slot. The
// outermost is always a batch or channel dim (q = j, r = 0;
// make_interleave_walk), whose coordinate is what the others leave.
template <int kOuter, typename Index>
BWDCONV_HOST_DEVICE inline RowOrigin<kOuter, Index> row_origin(const InterleaveParams& p,
                                                               Position row) {
  RowOrigin<kOuter, Index> origin;
  origin.entry = -p.first_phase * kPhaseBytes;
  Position rest = row;
  for (int k = kOuter - 1; k >= 0; --k) {
    const InterleaveWalkDim& dim = p.outer[k];
    // the outermost coordinate is what the others leave (row < rows)
    const Position next = k == 0 ? 0 : divide_position(rest, dim.size);
    const Position j = rest - next * static_cast<Position>(dim.size.value);
    rest = next;
    if (k == 0) {
      origin.slot[k] = j;
    } else {
      const Position shifted = j + dim.padding;
      const Position q = divide_position(shifted, dim.step);
      origin.entry +=
          (shifted - q * static_cast<Position>(dim.step.value)) * (dim.phase_weight * kPhaseBytes);
      origin.slot[k] = q;
    }
    origin.dst_offset += j * static_cast<Index>(dim.dst_stride);
  }
  return origin;
}

// What one residue of the row dim reads in one row: the phase result's row
// (at slot 0), whose slots below `extent` hold values and the rest zeros
// (extent 0: all zeros, the phase writes zeros or the row is past its
// result), or nothing at all (`keep`: another launch or writer owns it).
template <typename Bits, typename Index>
struct RowSource {
  const Bits* row = nullptr;
  Index stride = 0;
  Position extent = 0;
  bool keep = false;
};

// Every field of the phase is read whatever it writes (an entry outside the
// launch reads entry 0 and is kept), so the lookup has no branches of its own.
template <typename Bits, typename Index, int kOuter>
BWDCONV_HOST_DEVICE inline RowSource<Bits, Index> row_source(const InterleaveParams& p,
                                                             const RowOrigin<kOuter, Index>& origin,
                                                             Position residue) {
  const int entry = origin.entry + residue * (p.row.phase_weight * kPhaseBytes);
  const bool inside = entry >= 0 && entry < p.phase_count * kPhaseBytes;
  const PhaseSource& phase = *reinterpret_cast<const PhaseSource*>(
      reinterpret_cast<const char*>(p.phases) + (inside ? entry : 0));
  bool live = inside & (phase.write == PhaseWrite::Copy);
  Index offset = 0;
  for (int k = 0; k < kOuter; ++k) {
    live = live & (origin.slot[k] < phase.extent[k]);
    offset += origin.slot[k] * static_cast<Index>(phase.strides[k]);
  }
  RowSource<Bits, Index> source;
  source.keep = !inside | (phase.write == PhaseWrite::Keep);
  source.row = live ? static_cast<const Bits*>(phase.data) + offset : nullptr;
  source.stride = live ? static_cast<Index>(phase.row_stride) : 0;
  source.extent = live ? phase.row_extent : 0;
  return source;
}

// The first row position whose slot of `residue` lies past the source's
// values (the row size when none does).
template <typename Bits, typename Index>
BWDCONV_HOST_DEVICE inline Position values_end(const RowSource<Bits, Index>& source,
                                               Position residue, Position step, Position padding,
                                               Position size) {
  const Position end = step * source.extent + residue - padding;
  return source.extent > 0 && end < size ? end : size;
}

}  // namespace bwdconv::hip
