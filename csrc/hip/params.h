// Torch-free launch parameters: raw pointers, int64 sizes and element strides.
#pragma once

#include <cstdint>

namespace bwdconv::hip {

// Batch, channel and up to three spatial dims.
constexpr int kMaxTensorDims = 5;
constexpr int kMaxSpatialDims = 3;

// A strided view of a tensor: sizes and element strides in logical
// (N, C, spatial...) order.
struct TensorView {
  int64_t sizes[kMaxTensorDims] = {};
  int64_t strides[kMaxTensorDims] = {};
  int dims = 0;
};

// A divisor below 2^31 with the constants of narrow division: with
// shift = ceil(log2(value)) and magic = floor(2^32 * (2^shift - value) / value) + 1,
// v / value = (mulhi(v, magic) + v) >> shift for every v < 2^31 (Granlund and
// Montgomery, "Division by invariant integers using multiplication", PLDI 1994;
// the sum stays below 2^32 because v < 2^31). Built by make_divisor (layout.h),
// used by divide_position (row_index.h).
struct Divisor {
  uint32_t value = 1;
  uint32_t magic = 1;
  uint32_t shift = 0;
};

// One dst dim of the scatter's row walk and the source dim it reads: dst
// position j holds source position o = (j - lead) / step when step divides
// j - lead and 0 <= o < src_size, else a zero (batch and channel dims: lead 0,
// step 1).
struct ScatterWalkDim {
  int64_t dst_stride = 0;
  int64_t src_stride = 0;
  Divisor size;  // dst extent
  Divisor step;
  int32_t lead = 0;
  int32_t src_size = 1;
};

// Dims of a scatter walk besides the row itself.
constexpr int kOuterDims = kMaxTensorDims - 1;

// How the threads of a row walk (row_index.h) share a row of dst's stride-1
// dim: 2^lane_shift threads per row, each writing 16-byte chunks (aligned in
// memory) in turn; the row's positions j map to a source position o and
// remainder r, j - lead = o * step + r (lead and step are the walk's).
// Built by make_row_walk (layout.h).
struct RowWalk {
  int64_t chunks_per_row = 0;  // (row size + chunk - 1) / chunk, rounded up
  int lane_shift = 0;
  // A multiple of step with first - lead + bias >= 0 for every chunk's first
  // position, and its quotient by step.
  int64_t bias = 0;
  int64_t bias_quotient = 0;
  // (2^lane_shift * chunk) as a quotient and remainder by step.
  int64_t advance_quotient = 0;
  int64_t advance_remainder = 0;
};

// scatter (docs/DESIGN.md, "scatter"): the zero-inserted, padded grad_output
// dst[n, c, j...] = src[n, c, (j - lead)/stride...] where every (j - lead) is
// a non-negative multiple of its stride below src's size, and 0 elsewhere,
// walked in rows of dst's stride-1 dim. outer[] holds the other dims
// outermost first, already in walk order, so the kernel indexes no array at
// run time; positions and row indices stay below 2^31. When dst is dense in
// walk order (rows back to back: the ops' buffer always is) and its element
// count stays below 2^31, `dense` walks its memory in aligned 16-byte chunks
// that run on across row ends instead of row by row.
// Built by make_scatter_walk (layout.h). Elements are copied as raw bits of
// `element_bytes` (2, 4 or 8).
struct ScatterParams {
  const void* src = nullptr;
  void* dst = nullptr;
  ScatterWalkDim outer[kOuterDims];
  int outer_dims = 1;  // outer[0 .. outer_dims) in use
  ScatterWalkDim row;
  int64_t rows = 0;
  RowWalk walk;  // with row.lead and row.step
  int element_bytes = 4;
  bool wide_offsets = false;  // element offsets may reach 2^31
  bool dense = false;         // the chunks of dst's memory, not rows
  int passes = 0;             // dense: chunks per thread (0: launch.h, dense_passes)
};

// What the interleave pass does with the dx slots of one phase.
enum class PhaseWrite : int {
  Zero,  // the phase has no taps, or this pass zero-fills it
  Copy,  // slots q < extent copy the phase's result, later slots are zero
  Keep,  // another writer (a GEMM writing in place) already filled them
};

// Dims of an interleave walk besides the row: batch, groups, channels per
// group and two spatial dims (make_interleave_walk merges what it can).
constexpr int kInterleaveOuterDims = kMaxTensorDims;

// One dim of dx in the interleave's row walk: position j is slot
// q = (j + padding) div step of residue r = (j + padding) mod step, and r
// adds r * phase_weight to the phase (docs/DESIGN.md, "Geometry"). Batch and
// channel dims: step 1, padding 0, weight 0.
struct InterleaveWalkDim {
  int64_t dst_stride = 0;
  Divisor size;  // dx extent
  Divisor step;
  int32_t padding = 0;
  int32_t phase_weight = 0;
};

// The result of one phase's stride-1 sub-convolution as the walk reads it:
// slot q of walk dim k (outer[k], then the row) is strides[k] (row_stride)
// elements further; slots at or past extent[k] (row_extent) are zeros.
struct PhaseSource {
  const void* data = nullptr;
  int64_t strides[kInterleaveOuterDims] = {};
  int64_t row_stride = 0;
  int32_t extent[kInterleaveOuterDims] = {};
  int32_t row_extent = 0;
  PhaseWrite write = PhaseWrite::Zero;
};

// Phases one interleave launch can carry (stride^d above this takes several
// launches, each writing only its own phases' slots).
constexpr int kMaxPhasesPerLaunch = 32;

// interleave (docs/DESIGN.md, "Geometry"): dx[n, c, i...] is slot q = (i + p) div s
// of phase r = (i + p) mod s (residues row-major, last dim fastest), for the
// phases [first_phase, first_phase + phase_count); other phases are left as
// they are. dx is walked in rows of its stride-1 dim (W in NCHW, channels in
// channels_last), the other dims outer[] outermost first, already in walk
// order (channels split into groups and channels per group where the phase
// results keep groups apart), so the kernel indexes no array at run time.
// Positions, slots and row indices stay below 2^31. When dx is dense in
// walk order (rows back to back: the ops' dx always is), `dense` walks its
// memory in aligned 16-byte chunks that run on across row ends instead of
// row by row. Built by make_interleave_walk (layout.h). Elements are copied as raw bits of
// `element_bytes` (2, 4 or 8).
struct InterleaveParams {
  void* dst = nullptr;
  InterleaveWalkDim outer[kInterleaveOuterDims];
  int outer_dims = 1;  // outer[0 .. outer_dims) in use
  InterleaveWalkDim row;
  int64_t rows = 0;
  RowWalk walk;  // lead -row.padding, step row.step
  int first_phase = 0;
  int phase_count = 0;
  PhaseSource phases[kMaxPhasesPerLaunch];
  int element_bytes = 4;
  bool wide_offsets = false;  // element offsets may reach 2^31
  bool dense = false;         // the chunks of dx's memory, not rows
  int passes = 0;             // dense: chunks per thread (0: launch.h, dense_passes)
};

// relayout's conversion (docs/DESIGN.md, "relayout"): a batch of matrices
// transposed, src[b][r][s] at b * src_batch_stride + r * src_row_stride + s
// into dst[b][s][r] at b * dst_batch_stride + s * dst_column_stride + r, for
// b < batches, r < rows, s < columns; `element_bytes` wide (2, 4 or 8), its
// bits copied. NCHW to channels_last is rows = C, columns = H*W; back is
// rows = H*W, columns = C. Offsets are 64-bit.
struct RelayoutParams {
  const void* src = nullptr;
  void* dst = nullptr;
  int64_t batches = 0;
  int64_t rows = 0;
  int64_t columns = 0;
  int64_t src_batch_stride = 0;
  int64_t src_row_stride = 0;
  int64_t dst_batch_stride = 0;
  int64_t dst_column_stride = 0;
  int element_bytes = 0;
};

}  // namespace bwdconv::hip
