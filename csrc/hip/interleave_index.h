// Index math of the interleave kernel (phase, phase_stacked and swap1x1 write
// dx with it), shared with its unit tests.
#pragma once

#include <cstdint>

#include "index.h"

namespace bwdconv::hip {

// Where dx element `coords` comes from: a phase's result at `offset`
// (Copy), a zero (Zero), or another pass (Keep).
struct InterleaveSource {
  PhaseWrite write = PhaseWrite::Zero;
  int entry = 0;  // index into InterleaveParams::phases when write == Copy
  int64_t offset = 0;
};

// dx position i of a spatial dim is slot q = (i + p) div s of residue
// r = (i + p) mod s, since i = s*q + r - p (docs/DESIGN.md, "Geometry").
// Index as in divide.
template <typename Index = int64_t>
BWDCONV_HOST_DEVICE inline InterleaveSource interleave_source(const InterleaveParams& p,
                                                              const int64_t* coords) {
  const int spatial = p.dst_view.dims - 2;
  int64_t slot[kMaxSpatialDims] = {};
  int64_t phase = 0;
  for (int d = 0; d < spatial; ++d) {
    int64_t residue;
    divide<Index>(coords[d + 2] + p.padding[d], p.stride[d], &slot[d], &residue);
    phase = phase * p.stride[d].value + residue;
  }
  InterleaveSource source;
  const int64_t entry = phase - p.first_phase;
  if (entry < 0 || entry >= p.phase_count) {
    source.write = PhaseWrite::Keep;
    return source;
  }
  const PhaseSource& ps = p.phases[entry];
  source.write = ps.write;
  source.entry = static_cast<int>(entry);
  if (ps.write != PhaseWrite::Copy) return source;
  int64_t group, channel;
  divide<Index>(coords[1], p.channels_per_group, &group, &channel);
  int64_t offset = coords[0] * ps.strides[0] + group * p.group_stride + channel * ps.strides[1];
  for (int d = 0; d < spatial; ++d) {
    if (slot[d] >= ps.extent[d]) {  // past the sub-convolution's output: a zero
      source.write = PhaseWrite::Zero;
      return source;
    }
    offset += slot[d] * ps.strides[d + 2];
  }
  source.offset = offset;
  return source;
}

}  // namespace bwdconv::hip

namespace bwdconv::hip {

// Whether the interleave walk may divide narrow (host only): i + p is its
// largest spatial dividend; channels stay below the element count.
inline bool interleave_divides_narrow(const InterleaveParams& p) {
  return walk_divides_narrow(p.dst_view, p.stride, p.padding);
}

}  // namespace bwdconv::hip
