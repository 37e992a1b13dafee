// Host-side preparation of the kernels' walks from tensor views.
#pragma once

#include <cstdint>

#include "params.h"

namespace bwdconv::hip {

// A Divisor (params.h) for 1 <= value < 2^31.
Divisor make_divisor(int64_t value);

// How 2^lane_shift threads share rows of `size` positions whose positions j
// map to source positions (j - lead) / step, for 16-byte chunks of
// `element_bytes` elements (params.h, "RowWalk").
RowWalk make_row_walk(int64_t size, int64_t lead, int64_t step, int element_bytes);

// The scatter's row walk over dst, the zero-inserted, padded src (views in
// logical order; stride and lead per spatial dim, DESIGN.md "scatter"): dims
// ordered by decreasing dst stride, size-1 dims that read source position 0
// dropped, one-to-one neighbours (lead 0, step 1, whole) merged, dst's
// stride-1 dim as the row; `dense` when dst is dense in that order and below
// 2^31 elements. False (p untouched) when dst has no stride-1 dim,
// a position would reach 2^31, or more than kOuterDims dims remain (with a
// one-to-one dim of size 1 put first where the outermost is not one-to-one).
bool make_scatter_walk(const TensorView& src, const TensorView& dst, const int64_t* stride,
                       const int64_t* lead, int element_bytes, ScatterParams* p);

// One phase's sub-convolution result as the interleave reads it, in logical
// order [N, C', q...]: `data` points at the phase's first channel.
struct PhaseResult {
  PhaseWrite write = PhaseWrite::Zero;
  const void* data = nullptr;
  int64_t sizes[kMaxTensorDims] = {};
  int64_t strides[kMaxTensorDims] = {};
};

// One interleave launch in logical terms (params.h, "InterleaveParams"):
// dx and its view, the convolution's stride and padding per spatial dim,
// the channel map (dx channel c reads channel
// (c / channels_per_group) * group_stride + (c % channels_per_group) * strides[1]
// of its phase's result) and the phases [first_phase, first_phase + phase_count).
struct InterleaveLaunch {
  void* dst = nullptr;
  TensorView dst_view;
  int64_t stride[kMaxSpatialDims] = {1, 1, 1};
  int64_t padding[kMaxSpatialDims] = {};
  int64_t channels_per_group = 1;
  int64_t group_stride = 0;
  int first_phase = 0;
  int phase_count = 0;
  PhaseResult phases[kMaxPhasesPerLaunch];
  int element_bytes = 4;
  bool wide_offsets = false;  // 64-bit offsets whatever the sizes (tests)
};

// The interleave's row walk over dx: size-1 dims folded into the phases,
// the others ordered by decreasing dx stride, neighbouring batch and channel
// dims merged where dx and every result step over them alike, dx's stride-1
// dim as the row; `dense` when dx is dense in that order. False (p
// untouched) when a position, slot or row index would reach 2^31, dx has no
// stride-1 dim, or more than five outer dims remain (with a batch-like dim
// of size 1 put first where the outermost is spatial; a dense dx keeps batch
// outermost).
bool make_interleave_walk(const InterleaveLaunch& launch, InterleaveParams* p);

}  // namespace bwdconv::hip
