// phase: the input gradient of a strided convolution as stride^d stride-1
// sub-convolutions over filter slices (docs/DESIGN.md, "Geometry").
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "geometry.h"

namespace bwdconv {

// One spatial dim of one phase r: the dx positions i = s*q + r - p.
struct PhaseDim {
  int64_t residue = 0;       // r in [0, s)
  int64_t first_tap = 0;     // k0: the smallest k with (k*d - r) mod s == 0
  int64_t tap_step = 1;      // s/g between consecutive taps, g = gcd(d, s)
  int64_t tap_count = 0;     // |T_r|; 0 means the phase is empty in this dim
  int64_t sub_dilation = 1;  // d/g: the m_k of consecutive taps are d/g apart
  // The sub-convolution is a stride-1 correlation of dy with the flipped tap
  // slice, symmetric padding m_last = m_k of the last tap, dilation d/g:
  //   out[q] = sum_j w[k0 + (count-1-j)*step] * dy[q + j*d/g - m_last]
  int64_t conv_padding = 0;
  int64_t conv_output = 0;   // O + 2*m_last - (d/g)*(count-1)
  int64_t q_begin = 0;       // the phase's slots: q in [q_begin, q_end) ...
  int64_t q_end = 0;         // ... with 0 <= s*q + r - p < I
  int64_t computed_end = 0;  // q in [q_begin, computed_end) come from out[q]; later q are 0
  int64_t dst_offset = 0;    // s*q_begin + r - p: first dx position of the phase
  int64_t dst_stride = 1;    // s

  int64_t slots() const { return q_end > q_begin ? q_end - q_begin : 0; }
  int64_t computed() const { return computed_end > q_begin ? computed_end - q_begin : 0; }
};

struct Phase {
  std::array<PhaseDim, kMaxSpatialDims> dims{};
  int spatial_dims = 0;

  // No filter tap in some dim: every slot of the phase is zero, nothing is launched.
  bool empty() const;
  // No dx position belongs to the phase (possible when the input is shorter than the stride).
  bool has_no_slots() const;
  int64_t tap_count() const;  // product over dims
};

// Phase r of one dim: input size I, filter K, output O, stride s, padding p, dilation d.
PhaseDim make_phase_dim(int64_t input, int64_t filter, int64_t output, int64_t stride,
                        int64_t padding, int64_t dilation, int64_t residue);

// Every phase of a valid geometry, residues in row-major order (last dim fastest).
std::vector<Phase> enumerate_phases(const ConvGeometry& geometry);

}  // namespace bwdconv
