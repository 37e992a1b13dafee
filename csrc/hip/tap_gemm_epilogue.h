// tap_gemm's epilogue (csrc/hip/tap_gemm.cu): the block's sums, in shared
// memory, written to dx as cells of products and holes (docs/DESIGN.md,
// "swap1x1"). A kernel-only header, in its target's namespace
// (portability.h).
#pragma once

#include <cstdint>
#include <type_traits>

#include "element.h"
#include "portability.h"
#include "tap_gemm_tiles.h"

namespace bwdconv::hip {
inline namespace BWDCONV_TARGET_NAMESPACE {

#if defined(BWDCONV_WARP_MMA)

// The tap a dx position at offset r of its cell reaches in one dim (r = t*d),
// or -1 where none does (a hole).
__device__ inline int tap_at(int r, int dilation, int taps) {
  if (dilation == 1) return r < taps ? r : -1;
  if (r % dilation != 0) return -1;
  return r / dilation < taps ? r / dilation : -1;
}

// Column j of the block as its runs need it, read from shared memory once
// per thread where a thread keeps its column. Its dims are indexed in loops
// of constant count, which nvcc unrolls, so that it stays in registers.
struct RunColumn {
  int j;
  bool exists;
  int64_t dx;                       // offset of dx[n, 0, 0...]
  int32_t first[kMaxSpatialDims];   // s_i * q_i - p_i

  __device__ int32_t first_of(int dim) const {
    return dim == 0 ? first[0] : dim == 1 ? first[1] : first[2];
  }
};
static_assert(kMaxSpatialDims == 3, "RunColumn::first_of names each dim");

// Dims past the call's are zero: describe_column wrote only its own.
__device__ inline RunColumn run_column(const TapGemmShape& s, const TapGemmTiles& tiles, int j) {
  RunColumn column{j, tiles.column_grad_output[j] >= 0, tiles.column_dx[j], {}};
  for (int i = 0; i < kMaxSpatialDims; ++i) {
    column.first[i] = column.exists && i < s.spatial_dims ? tiles.column_first[i][j] : 0;
  }
  return column;
}

// Whether dx's channels are its innermost dim (channels_last): the
// epilogue's lanes then take consecutive channels, whose rows lie T apart
// in a column of the sums, and the sums are kept by column, where a warp's
// 32 reads share a bank at most T ways (1, 2, 4 for T = 1, 2, 4 taps; kept
// row-major, rows 72 floats apart, 8, 16 and 16 ways: docs/DESIGN.md,
// "swap1x1"). Otherwise the lanes take consecutive columns of one row,
// which row-major sums keep in distinct banks.
__device__ inline bool channels_inner(const TapGemmParams& p, const TapGemmShape& s) {
  return p.dx_view.strides[1] == 1 && s.channels > 1;
}

// A run's outer dims, every dim but the last: what the runs of one cell row
// share whatever their channel. `outer` is the run's offsets in those dims,
// row-major over their strides.
struct RunOuter {
  bool inside;     // every outer position lies inside dx
  bool a_tap;      // every outer offset is a tap's (else the run is holes)
  int tap;         // the outer taps, row-major with the last dim's taps fastest
  int64_t offset;  // the outer positions' offset in dx
};

__device__ inline RunOuter run_outer(const TapGemmParams& p, const TapGemmShape& s,
                                     const RunColumn& column, int outer) {
  const int last = s.spatial_dims - 1;
  RunOuter o{true, true, 0, 0};
  int taps_after = static_cast<int>(p.filter[last]);
  for (int i = kMaxSpatialDims - 2; i >= 0; --i) {
    if (i >= last) continue;
    // Below the outermost dim `outer` is what remains after dividing out
    // the inner dims' offsets: dim 0's offset itself (no division in 2D).
    const int stride = static_cast<int>(p.stride[i]), r = i == 0 ? outer : outer % stride;
    if (i != 0) outer /= stride;
    const int64_t x = int64_t{column.first_of(i)} + r;
    o.inside = o.inside && x >= 0 && x < p.dx_view.sizes[2 + i];
    o.offset += x * p.dx_view.strides[2 + i];
    const int t = tap_at(r, static_cast<int>(p.dilation[i]), static_cast<int>(p.filter[i]));
    o.a_tap = o.a_tap && t >= 0;
    o.tap += t * taps_after;
    taps_after *= static_cast<int>(p.filter[i]);
  }
  return o;
}

// A run's last dim, the same for every run of a column: its positions
// first + r, 0 <= r < stride, of which r = t*d hold the taps.
struct RunLast {
  int stride, dilation, taps;
  int64_t first, size, step;
  bool pairs;  // contiguous, 4-byte aligned: neighbours go out in one store
  // A pair of products: stride 2, two taps, no dilation, both inside dx
  // (U-Net's kernel = stride 2 in NCHW): no holes, no bounds to check.
  bool product_pair;
};

__device__ inline RunLast run_last(const TapGemmParams& p, const TapGemmShape& s,
                                   const RunColumn& column) {
  const int last = s.spatial_dims - 1;
  RunLast l;
  l.stride = static_cast<int>(p.stride[last]);
  l.dilation = static_cast<int>(p.dilation[last]);
  l.taps = static_cast<int>(p.filter[last]);
  l.first = column.first_of(last);
  l.size = p.dx_view.sizes[2 + last];
  l.step = p.dx_view.strides[2 + last];
  l.pairs = l.step == 1 && reinterpret_cast<uintptr_t>(p.dx) % sizeof(uint32_t) == 0;
  l.product_pair = l.pairs && l.stride == 2 && l.taps == 2 && l.dilation == 1 && l.first >= 0 &&
                   l.first + 2 <= l.size;
  return l;
}

// Two sums as the bits of two neighbouring elements, `low` first in memory:
// on CUDA one conversion instruction for both (cvt.rn.{bf16,f16}x2.f32,
// sm_80 and later, as tap_gemm is; PTX puts its first operand in the upper
// half), rounding to nearest even as FromAccumulator's bit arithmetic,
// which the host target runs, does (a NaN's payload may differ).
template <typename T>
__device__ inline uint32_t pair_bits(float low, float high) {
#if defined(__CUDA_ARCH__) && !defined(BWDCONV_HOST_TARGET)
  uint32_t bits;
  if constexpr (std::is_same_v<T, BFloat16>) {
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(bits) : "f"(high), "f"(low));
  } else {
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(bits) : "f"(high), "f"(low));
  }
  return bits;
#else
  return uint32_t{FromAccumulator<T>::convert(low).bits} |
         uint32_t{FromAccumulator<T>::convert(high).bits} << 16;
#endif
}

// One run of a cell: channel ch of the block, column j, offsets o in the
// cell's outer dims, every offset r of the last dim. The cell of
// grad_output position q is dx's positions s*q - p + r, 0 <= r < s per
// dim, and holds q's products, dx[n, c, s*q + t*d - p] = sums[(c, t)][(n, q)]
// at r = t*d (docs/DESIGN.md, "swap1x1"; the taps lie within the stride),
// and zeros at its other offsets, the holes. The cells of all q cover dx
// but for a tail past s*O - p (cells_cover_dx), so dx needs no zeroing
// pass otherwise.
template <typename T>
__device__ inline void write_run(const TapGemmParams& p, const TapGemmShape& s,
                                 const TapGemmTiles& tiles, int64_t first_channel, int ch,
                                 const RunOuter& o, const RunLast& l, const RunColumn& column,
                                 bool by_column) {
  const int64_t c = first_channel + ch;
  if (c >= s.channels) return;
  const int64_t offset = column.dx + c * p.dx_view.strides[1] + o.offset;
  const int row = ch * static_cast<int>(s.taps) + o.tap, j = column.j;
  T* dx = static_cast<T*>(p.dx);
  // A pair of products in one aligned store, without the walk below.
  if (l.product_pair && !by_column && (offset + l.first) % 2 == 0) {
    const float low = o.a_tap ? tiles.sums[row][j] : 0.0f;
    const float high = o.a_tap ? tiles.sums[row + 1][j] : 0.0f;
    global_store(reinterpret_cast<uint32_t*>(dx + offset + l.first), pair_bits<T>(low, high));
    return;
  }
  // The last dim's taps at r = 0, d, 2d, ...: counted, not divided; the
  // value of offset r, visited in order.
  int t = 0, next_tap = 0;
  const auto value_at = [&](int r) {
    if (r != next_tap || t >= l.taps) return 0.0f;
    const float value =
        !o.a_tap ? 0.0f : by_column ? tiles.sums_by_column[j][row + t] : tiles.sums[row + t][j];
    ++t;
    next_tap += l.dilation;
    return value;
  };
  for (int r = 0; r < l.stride;) {
    const int64_t x = l.first + r, at = offset + x * l.step;
    if (l.pairs && r + 1 < l.stride && x >= 0 && x + 1 < l.size && at % 2 == 0) {
      const float low = value_at(r);
      global_store(reinterpret_cast<uint32_t*>(dx + at), pair_bits<T>(low, value_at(r + 1)));
      r += 2;
      continue;
    }
    const float value = value_at(r);
    if (x >= 0 && x < l.size) global_store(dx + at, FromAccumulator<T>::convert(value));
    ++r;
  }
}

// Every run of the block's cells: (channel, outer offsets, column) items.
// Where dx's positions are its inner dims (NCHW), consecutive threads take
// consecutive columns, and so store consecutive elements of a dx row; each
// thread keeps its column, and works out each cell row's outer dims once
// for all its channels. Where the channels are (channels_last),
// consecutive threads take consecutive channels.
template <typename T>
__device__ inline void write_cells(const TapGemmParams& p, const TapGemmShape& s,
                                   const TapGemmTiles& tiles, int64_t first_channel) {
  int cell_outer = 1;  // offsets of the outer dims' cells
  for (int i = 0; i + 1 < s.spatial_dims; ++i) cell_outer *= static_cast<int>(p.stride[i]);
  const int channels = static_cast<int>(s.channels_per_block);
  if (channels_inner(p, s)) {
    // At most 64 * kTapGemmMaxCell * 64 items: 32-bit arithmetic.
    const int items = channels * cell_outer * kColumns;
    for (int e = threadIdx.x; e < items; e += kThreads) {
      const int rest = e / channels;
      const RunColumn column = run_column(s, tiles, rest % kColumns);
      if (!column.exists) continue;
      const RunOuter o = run_outer(p, s, column, rest / kColumns);
      if (!o.inside) continue;
      write_run<T>(p, s, tiles, first_channel, e % channels, o, run_last(p, s, column), column,
                   true);
    }
    return;
  }
  const RunColumn column = run_column(s, tiles, static_cast<int>(threadIdx.x) % kColumns);
  if (!column.exists) return;
  const RunLast l = run_last(p, s, column);
  // The threads of a column (kThreads / kColumns of them) split its
  // channels, or its cell rows where a block has fewer channels than that
  // (more than 32 taps); a cell row's outer dims are worked out once.
  const int group = static_cast<int>(threadIdx.x) / kColumns, groups = kThreads / kColumns;
  const bool split_rows = channels < groups;
  for (int outer = split_rows ? group : 0; outer < cell_outer; outer += split_rows ? groups : 1) {
    const RunOuter o = run_outer(p, s, column, outer);
    if (!o.inside) continue;
    for (int ch = split_rows ? 0 : group; ch < channels; ch += split_rows ? 1 : groups) {
      write_run<T>(p, s, tiles, first_channel, ch, o, l, column, false);
    }
  }
}

#endif  // BWDCONV_WARP_MMA

}  // namespace BWDCONV_TARGET_NAMESPACE
}  // namespace bwdconv::hip
