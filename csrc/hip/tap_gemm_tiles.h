// tap_gemm's block (csrc/hip/tap_gemm.cu): its shape, and the shared
// memory its steps and its epilogue (tap_gemm_epilogue.h) share. A
// kernel-only header, in its target's namespace (portability.h).
#pragma once

#include <cstdint>

#include "portability.h"
#include "tap_gemm.h"
#include "warp_mma.h"

namespace bwdconv::hip {
inline namespace BWDCONV_TARGET_NAMESPACE {

// One block: 64 GEMM rows (whole channels, each with all its taps) by 64
// columns (positions (n, q) of grad_output), summed over the O channels of
// grad_output 32 at a time; 4 warps, each a 32x32 corner as 2x2 products
// of 16x16 tiles.
constexpr int kRows = 64;
constexpr int kColumns = 64;
constexpr int kThreads = 128;
// 16-bit elements per 16-byte load or store.
constexpr int kVector = 8;
// Blocks an SM keeps resident, asked of the compiler (at most 128
// registers a thread; 22 KB of shared memory a block).
constexpr int kBlocksPerMultiprocessor = 4;

struct TapGemmShape {
  int spatial_dims;
  int64_t taps;          // T = prod(K)
  int64_t channels;      // C (dx's)
  int64_t out_channels;  // O (grad_output's)
  int64_t positions;     // Q = prod(grad_output's spatial sizes)
  int64_t columns;       // N * Q
  int64_t channels_per_block;
  int64_t row_blocks;
};

BWDCONV_HOST_DEVICE inline TapGemmShape shape_of(const TapGemmParams& p) {
  TapGemmShape s;
  s.spatial_dims = p.dx_view.dims - 2;
  s.taps = 1;
  s.positions = 1;
  for (int i = 0; i < s.spatial_dims; ++i) {
    s.taps *= p.filter[i];
    s.positions *= p.grad_output_view.sizes[2 + i];
  }
  s.channels = p.dx_view.sizes[1];
  s.out_channels = p.grad_output_view.sizes[1];
  s.columns = p.grad_output_view.sizes[0] * s.positions;
  s.channels_per_block = kRows / s.taps;
  s.row_blocks = (s.channels + s.channels_per_block - 1) / s.channels_per_block;
  return s;
}

#if defined(BWDCONV_WARP_MMA)

constexpr int kDepth = 32;
constexpr int kWarpRows = 32;
constexpr int kWarpColumns = 32;
// Row padding of the shared tiles (elements): rows of a fragment fall in
// different banks, and each row stays 16-byte aligned.
constexpr int kPad = 8;
constexpr int kDepthStride = kDepth + kPad;
constexpr int kColumnStride = kColumns + kPad;
// Column-major sums (channels_inner): a column's rows padded by 4 floats,
// so that each column starts 16 bytes aligned and neighbouring columns start
// in different banks.
constexpr int kRowStride = kRows + 4;

// The operands of one depth step. a: the filter's rows [r][k]. b: grad_output
// as [k][j] (row-major), or as [j][k] (column-major) where the channels
// walk reads 8 consecutive k of one column.
// Every fragment's tile starts 32-byte aligned (warp_mma.h).
struct TapGemmStage {
  alignas(32) uint16_t a[kRows][kDepthStride];
  alignas(32) uint16_t b[kColumns * kDepthStride];  // = kDepth * kColumnStride
};
static_assert(kColumns * kDepthStride >= kDepth * kColumnStride, "b holds either layout");

// What a block's stages and epilogue share: two stages (one multiplied while
// the next is stored), whose space the sums take once the products are done,
// row-major or by column (sums_by_column[j][r], where the epilogue's lanes
// take consecutive channels: channels_inner); and where each of its columns
// (n, q) lies in grad_output and dx.
struct TapGemmTiles {
  union {
    TapGemmStage stages[2];
    float sums[kRows][kColumnStride];
    float sums_by_column[kColumns][kRowStride];
  };
  int64_t column_grad_output[kColumns];  // offset of dy[n, 0, q]; -1: no column
  int64_t column_dx[kColumns];           // offset of dx[n, 0, 0...]
  int32_t column_first[kMaxSpatialDims][kColumns];  // s_i * q_i - p_i
};

#endif  // BWDCONV_WARP_MMA

}  // namespace BWDCONV_TARGET_NAMESPACE
}  // namespace bwdconv::hip
