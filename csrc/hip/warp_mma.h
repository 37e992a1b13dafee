// Warp-level 16x16x16 matrix products on 16-bit elements with fp32 sums, for
// the kernels that multiply (tap_gemm.cu): one interface, a definition per
// target.
//   - CUDA, sm_80 and later: the tensor cores through nvcuda::wmma
//     (BWDCONV_WARP_MMA is defined where they exist).
//   - The host target: the same operations on the whole tile, done by the
//     first lane of each warp (the lane that acts for its warp; the others
//     skip them), so a kernel's tiles, barriers and epilogue run as written.
//   - ROCm: none yet (BWDCONV_WARP_MMA undefined; a kernel that needs it
//     refuses at launch). AMD's matrix cores would be a third definition here.
// Operands are tiles in shared memory: A row-major [16 x 16] and B [16 x 16]
// row-major or column-major (its Layout: RowMajor, ColumnMajor), as the
// elements' bits (uint16_t), `ld` elements between rows (between columns for
// a column-major B); the accumulator is stored as floats, row-major or
// column-major (`ld` elements between columns). On CUDA `ld` is a multiple of 8
// (of 4 for the accumulator) and every tile starts 32-byte aligned.
#pragma once

#include <cstdint>
#if defined(BWDCONV_HOST_TARGET)
#include <cstdio>
#include <cstdlib>
#endif

#include "element.h"
#include "portability.h"

#if defined(BWDCONV_HOST_TARGET)
#define BWDCONV_WARP_MMA 1
#elif defined(__CUDACC__) && !defined(__HIPCC__) && (!defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800)
#define BWDCONV_WARP_MMA 1
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>
#endif

namespace bwdconv::hip {
inline namespace BWDCONV_TARGET_NAMESPACE {

constexpr int kMmaTile = 16;
constexpr int kWarpLanes = 32;

#if defined(BWDCONV_HOST_TARGET)

template <typename T>
inline float element_value(uint16_t bits);
template <>
inline float element_value<Half>(uint16_t bits) { return half_to_float(bits); }
template <>
inline float element_value<BFloat16>(uint16_t bits) { return bfloat16_to_float(bits); }

struct RowMajor {};
struct ColumnMajor {};

struct MmaTileValues {
  float v[kMmaTile][kMmaTile];
};
template <typename T>
struct MmaA : MmaTileValues {};
template <typename T, typename Layout = RowMajor>
struct MmaB : MmaTileValues {};
struct MmaAccumulator : MmaTileValues {};

inline bool acts_for_warp() { return threadIdx.x % kWarpLanes == 0; }

// What the tensor cores require of a tile (the header above): its start 32
// bytes aligned and `ld` a multiple of `ld_multiple` elements. A GPU breaks
// on a tile that does not meet it; the host target checks it, so that the
// kernels' tests on the host grid find such a tile before a GPU does.
inline void check_mma_tile(const void* tile, int ld, int ld_multiple) {
  if (reinterpret_cast<std::uintptr_t>(tile) % 32 == 0 && ld % ld_multiple == 0) return;
  std::fprintf(stderr,
               "bwdconv host grid: MMA tile at %p with ld %d: the tensor cores need a "
               "32-byte aligned start and ld a multiple of %d\n",
               tile, ld, ld_multiple);
  std::abort();
}

// Element (i, j) of the tile at tile[i * ld + j] (row-major) or at
// tile[i + j * ld] (column-major).
template <typename T>
inline void mma_load_tile(MmaTileValues& f, const uint16_t* tile, int ld, bool column_major) {
  if (!acts_for_warp()) return;
  check_mma_tile(tile, ld, 8);
  const int row_step = column_major ? 1 : ld, column_step = column_major ? ld : 1;
  for (int i = 0; i < kMmaTile; ++i) {
    for (int j = 0; j < kMmaTile; ++j) {
      f.v[i][j] = element_value<T>(tile[i * row_step + j * column_step]);
    }
  }
}
template <typename T>
inline void mma_load(MmaA<T>& f, const uint16_t* tile, int ld) {
  mma_load_tile<T>(f, tile, ld, false);
}
template <typename T>
inline void mma_load(MmaB<T, RowMajor>& f, const uint16_t* tile, int ld) {
  mma_load_tile<T>(f, tile, ld, false);
}
template <typename T>
inline void mma_load(MmaB<T, ColumnMajor>& f, const uint16_t* tile, int ld) {
  mma_load_tile<T>(f, tile, ld, true);
}

inline void mma_zero(MmaAccumulator& c) {
  if (!acts_for_warp()) return;
  for (auto& row : c.v) {
    for (float& x : row) x = 0.0f;
  }
}

// c += a b
template <typename T, typename Layout>
inline void mma(MmaAccumulator& c, const MmaA<T>& a, const MmaB<T, Layout>& b) {
  if (!acts_for_warp()) return;
  for (int i = 0; i < kMmaTile; ++i) {
    for (int k = 0; k < kMmaTile; ++k) {
      for (int j = 0; j < kMmaTile; ++j) c.v[i][j] += a.v[i][k] * b.v[k][j];
    }
  }
}

inline void mma_store(float* tile, const MmaAccumulator& c, int ld, bool column_major) {
  if (!acts_for_warp()) return;
  check_mma_tile(tile, ld, 4);
  for (int i = 0; i < kMmaTile; ++i) {
    for (int j = 0; j < kMmaTile; ++j) tile[column_major ? i + j * ld : i * ld + j] = c.v[i][j];
  }
}

#elif defined(BWDCONV_WARP_MMA)

template <typename T>
struct MmaElement;
template <>
struct MmaElement<Half> {
  using type = __half;
};
template <>
struct MmaElement<BFloat16> {
  using type = __nv_bfloat16;
};

using RowMajor = nvcuda::wmma::row_major;
using ColumnMajor = nvcuda::wmma::col_major;

template <typename T>
using MmaA = nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, kMmaTile, kMmaTile, kMmaTile,
                                    typename MmaElement<T>::type, RowMajor>;
template <typename T, typename Layout = RowMajor>
using MmaB = nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, kMmaTile, kMmaTile, kMmaTile,
                                    typename MmaElement<T>::type, Layout>;
using MmaAccumulator =
    nvcuda::wmma::fragment<nvcuda::wmma::accumulator, kMmaTile, kMmaTile, kMmaTile, float>;

template <typename T>
__device__ inline void mma_load(MmaA<T>& f, const uint16_t* tile, int ld) {
  nvcuda::wmma::load_matrix_sync(f, reinterpret_cast<const typename MmaElement<T>::type*>(tile),
                                 ld);
}
template <typename T, typename Layout>
__device__ inline void mma_load(MmaB<T, Layout>& f, const uint16_t* tile, int ld) {
  nvcuda::wmma::load_matrix_sync(f, reinterpret_cast<const typename MmaElement<T>::type*>(tile),
                                 ld);
}
__device__ inline void mma_zero(MmaAccumulator& c) { nvcuda::wmma::fill_fragment(c, 0.0f); }
template <typename T, typename Layout>
__device__ inline void mma(MmaAccumulator& c, const MmaA<T>& a, const MmaB<T, Layout>& b) {
  nvcuda::wmma::mma_sync(c, a, b, c);
}
__device__ inline void mma_store(float* tile, const MmaAccumulator& c, int ld, bool column_major) {
  nvcuda::wmma::store_matrix_sync(
      tile, c, ld, column_major ? nvcuda::wmma::mem_col_major : nvcuda::wmma::mem_row_major);
}

#endif

}  // namespace BWDCONV_TARGET_NAMESPACE
}  // namespace bwdconv::hip
