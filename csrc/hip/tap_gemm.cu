#include "tap_gemm.h"

#include <cstdint>
#include <type_traits>

#include "bits.h"
#include "element.h"
#include "tap_gemm_epilogue.h"
#include "tap_gemm_tiles.h"
#include "warp_mma.h"

namespace bwdconv::hip {
namespace {

// How a block reads its slices of grad_output, chosen per call from its
// strides (walk_of): 16-byte loads of 8 consecutive columns (positions dense
// and row-major, Q a multiple of 8: NCHW) or of 8 consecutive channels
// (channels_last, O a multiple of 8), else one element per load. The filter's
// rows are always read 16 bytes at a time (TapGemmParams).
enum class GradOutputWalk { columns, channels, elements };

#if defined(BWDCONV_WARP_MMA)

// Column j of the block: grad_output position (n, q), q row-major.
__device__ inline void describe_column(const TapGemmParams& p, const TapGemmShape& s,
                                       int64_t first_column, int j, TapGemmTiles& tiles) {
  const int64_t column = first_column + j;
  if (column >= s.columns) {
    tiles.column_grad_output[j] = -1;
    return;
  }
  const int64_t n = column / s.positions;
  int64_t q = column % s.positions, offset = n * p.grad_output_view.strides[0];
  for (int i = s.spatial_dims - 1; i >= 0; --i) {
    const int64_t size = p.grad_output_view.sizes[2 + i], position = q % size;
    q /= size;
    offset += position * p.grad_output_view.strides[2 + i];
    tiles.column_first[i][j] = static_cast<int32_t>(position * p.stride[i] - p.padding[i]);
  }
  tiles.column_grad_output[j] = offset;
  tiles.column_dx[j] = n * p.dx_view.strides[0];
}

// A depth step's loads: 64 x 32 elements of each operand, 256 16-byte
// vectors, two per thread; one element at a time, 16 per thread.
constexpr int kVectorShare = kRows * kDepth / kVector / kThreads;
constexpr int kElementShare = kDepth * kColumns / kThreads;
static_assert(kRows * kDepth == kDepth * kColumns, "both operands' steps are the same size");

template <GradOutputWalk walk>
struct GradOutputShare {
  Bits128 vectors[kVectorShare];
};
template <>
struct GradOutputShare<GradOutputWalk::elements> {
  uint16_t elements[kElementShare];
};

// This thread's share of a depth step, held in registers between its global
// loads and its stores to shared memory.
template <GradOutputWalk walk>
struct StepShare {
  Bits128 a[kVectorShare];
  GradOutputShare<walk> b;
};

// Vector v of a step (v = thread + i * kThreads) as (line, part): `parts`
// vectors per line of the tile, consecutive threads along a line.
struct VectorPlace {
  int line, part;
};
__device__ inline VectorPlace vector_place(int i, int parts) {
  const int v = static_cast<int>(threadIdx.x) + i * kThreads;
  return {v / parts, v % parts};
}

// The filter's rows of the block [first_row, first_row + kRows) at depth
// [first_o, first_o + kDepth): zeros for rows past the block's channels and
// past the matrix's row_elements (TapGemmParams: O rounded up to 8).
template <GradOutputWalk walk>
__device__ inline void fetch_rows(const TapGemmParams& p, const TapGemmShape& s, int64_t first_channel,
                                  int64_t first_o, StepShare<walk>& share) {
  const uint16_t* rows = static_cast<const uint16_t*>(p.rows);
  const int block_rows = static_cast<int>(s.channels_per_block * s.taps);
  const int64_t first_row = first_channel * s.taps, all_rows = s.channels * s.taps;
  for (int i = 0; i < kVectorShare; ++i) {
    const VectorPlace at = vector_place(i, kDepth / kVector);
    const int64_t row = first_row + at.line, o = first_o + at.part * kVector;
    const bool inside = at.line < block_rows && row < all_rows && o < p.row_elements;
    share.a[i] = inside ? global_load(reinterpret_cast<const Bits128*>(rows + row * p.row_elements + o))
                        : Bits128{0, 0};
  }
}

// grad_output's slice of the block's columns at depth [first_o, first_o +
// kDepth), as `walk` reads it; zeros past O and past the last column.
template <typename T, GradOutputWalk walk>
__device__ inline void fetch_grad_output(const TapGemmParams& p, const TapGemmShape& s,
                                         int64_t first_o, const TapGemmTiles& tiles,
                                         StepShare<walk>& share) {
  const uint16_t* grad_output = static_cast<const uint16_t*>(p.grad_output);
  const int64_t channel_stride = p.grad_output_view.strides[1];
  if constexpr (walk == GradOutputWalk::elements) {
    // Column j = thread % 64 fixed, k stepping: consecutive threads read
    // consecutive columns. Offsets, not pointers, until an element is read:
    // a column outside the tensor has no address.
    const int j = static_cast<int>(threadIdx.x) % kColumns;
    const int first_k = static_cast<int>(threadIdx.x) / kColumns;
    const int64_t at = tiles.column_grad_output[j];
    for (int i = 0; i < kElementShare; ++i) {
      const int64_t o = first_o + first_k + i * (kThreads / kColumns);
      share.b.elements[i] =
          at >= 0 && o < s.out_channels ? global_load(grad_output + at + o * channel_stride) : 0;
    }
  } else {
    constexpr bool columns = walk == GradOutputWalk::columns;
    for (int i = 0; i < kVectorShare; ++i) {
      // columns: line k, 8 columns per part; channels: line j, 8 k per part.
      const VectorPlace v = vector_place(i, columns ? kColumns / kVector : kDepth / kVector);
      const int j = columns ? v.part * kVector : v.line;
      const int64_t o = first_o + (columns ? v.line : v.part * kVector);
      const int64_t at = tiles.column_grad_output[j];
      share.b.vectors[i] =
          at >= 0 && o < s.out_channels
              ? global_load(reinterpret_cast<const Bits128*>(grad_output + at + o * channel_stride))
              : Bits128{0, 0};
    }
  }
}

template <GradOutputWalk walk>
__device__ inline void stage_step(const StepShare<walk>& share, TapGemmStage& stage) {
  for (int i = 0; i < kVectorShare; ++i) {
    const VectorPlace at = vector_place(i, kDepth / kVector);
    *reinterpret_cast<Bits128*>(&stage.a[at.line][at.part * kVector]) = share.a[i];
  }
  if constexpr (walk == GradOutputWalk::elements) {
    const int j = static_cast<int>(threadIdx.x) % kColumns;
    const int first_k = static_cast<int>(threadIdx.x) / kColumns;
    for (int i = 0; i < kElementShare; ++i) {
      stage.b[(first_k + i * (kThreads / kColumns)) * kColumnStride + j] = share.b.elements[i];
    }
  } else {
    constexpr bool columns = walk == GradOutputWalk::columns;
    for (int i = 0; i < kVectorShare; ++i) {
      const VectorPlace at = vector_place(i, columns ? kColumns / kVector : kDepth / kVector);
      const int line_stride = columns ? kColumnStride : kDepthStride;
      *reinterpret_cast<Bits128*>(&stage.b[at.line * line_stride + at.part * kVector]) =
          share.b.vectors[i];
    }
  }
}

// The warp's 32x32 corner of the stage's product, added to its sums.
template <typename T, GradOutputWalk walk>
__device__ inline void multiply_step(const TapGemmStage& stage, int warp_row, int warp_column,
                                     MmaAccumulator (&sums)[2][2]) {
  constexpr bool column_major = walk == GradOutputWalk::channels;
  using Layout = std::conditional_t<column_major, ColumnMajor, RowMajor>;
  for (int k = 0; k < kDepth; k += kMmaTile) {
    MmaA<T> a[2];
    MmaB<T, Layout> b[2];
    for (int i = 0; i < 2; ++i) {
      mma_load<T>(a[i], &stage.a[warp_row + i * kMmaTile][k], kDepthStride);
    }
    for (int j = 0; j < 2; ++j) {
      const int column = warp_column + j * kMmaTile;
      if constexpr (column_major) {
        mma_load<T>(b[j], &stage.b[column * kDepthStride + k], kDepthStride);
      } else {
        mma_load<T>(b[j], &stage.b[k * kColumnStride + column], kColumnStride);
      }
    }
    for (int i = 0; i < 2; ++i) {
      for (int j = 0; j < 2; ++j) mma<T>(sums[i][j], a[i], b[j]);
    }
  }
}

template <typename T, GradOutputWalk walk>
__device__ inline void tap_gemm_block(const TapGemmParams& p) {
  __shared__ TapGemmTiles tiles;
  const TapGemmShape s = shape_of(p);
  // Consecutive blocks share a column tile (its grad_output slice is read
  // again from cache), stepping through the channel blocks.
  const int64_t block = blockIdx.x;
  const int64_t first_channel = (block % s.row_blocks) * s.channels_per_block;
  const int64_t first_column = (block / s.row_blocks) * kColumns;
  for (int j = threadIdx.x; j < kColumns; j += kThreads) {
    describe_column(p, s, first_column, j, tiles);
  }
  const int warp = threadIdx.x / kWarpLanes;
  const int warp_row = (warp / 2) * kWarpRows, warp_column = (warp % 2) * kWarpColumns;
  MmaAccumulator sums[2][2];
  for (auto& row : sums) {
    for (MmaAccumulator& c : row) mma_zero(c);
  }
  StepShare<walk> share;
  fetch_rows(p, s, first_channel, 0, share);
  __syncthreads();  // the columns described
  fetch_grad_output<T>(p, s, 0, tiles, share);
  stage_step(share, tiles.stages[0]);
  __syncthreads();
  // Software pipeline: the next step's global loads are in flight while the
  // warps multiply this one; they go to the other stage, and one barrier
  // per step both publishes them and frees the stage just read.
  const int64_t steps = (s.out_channels + kDepth - 1) / kDepth;
  for (int64_t k = 0; k < steps; ++k) {
    const bool next = k + 1 < steps;
    if (next) {
      fetch_rows(p, s, first_channel, (k + 1) * kDepth, share);
      fetch_grad_output<T>(p, s, (k + 1) * kDepth, tiles, share);
    }
    multiply_step<T, walk>(tiles.stages[k % 2], warp_row, warp_column, sums);
    if (next) stage_step(share, tiles.stages[(k + 1) % 2]);
    __syncthreads();
  }
  const bool by_column = channels_inner(p, s);
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 2; ++j) {
      const int row = warp_row + i * kMmaTile, column = warp_column + j * kMmaTile;
      if (by_column) {
        mma_store(&tiles.sums_by_column[column][row], sums[i][j], kRowStride, true);
      } else {
        mma_store(&tiles.sums[row][column], sums[i][j], kColumnStride, false);
      }
    }
  }
  __syncthreads();
  write_cells<T>(p, s, tiles, first_channel);
}

#endif  // BWDCONV_WARP_MMA

// Empty where this compilation has no warp matrix products (its launcher
// refuses before launching).
template <typename T, GradOutputWalk walk>
__global__ void __launch_bounds__(kThreads, kBlocksPerMultiprocessor) tap_gemm_kernel(TapGemmParams p) {
#if defined(BWDCONV_WARP_MMA)
  tap_gemm_block<T, walk>(p);
#endif
}

#if defined(BWDCONV_WARP_MMA)
bool has_warp_mma() {
#if defined(BWDCONV_HOST_TARGET)
  return true;
#else
  int device = 0, major = 0;
  return cudaGetDevice(&device) == cudaSuccess &&
         cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) ==
             cudaSuccess &&
         major >= 8;
#endif
}
#else
bool has_warp_mma() { return false; }
#endif

bool aligned_vectors(const void* address) {
  return reinterpret_cast<uintptr_t>(address) % (kVector * sizeof(uint16_t)) == 0;
}

// Whether every dim of grad_output but `skip` steps by whole vectors (dims
// of one element take no steps).
bool strides_in_vectors(const TensorView& v, int skip) {
  for (int d = 0; d < v.dims; ++d) {
    if (d != skip && v.sizes[d] > 1 && v.strides[d] % kVector != 0) return false;
  }
  return true;
}

// GradOutputWalk's conditions: 8 consecutive columns (positions dense and
// row-major, never crossing a batch row) or 8 consecutive channels are 16
// aligned bytes.
GradOutputWalk walk_of(const TapGemmParams& p, const TapGemmShape& s) {
  const TensorView& v = p.grad_output_view;
  if (!aligned_vectors(p.grad_output)) return GradOutputWalk::elements;
  if (v.strides[1] == 1 && s.out_channels % kVector == 0 && strides_in_vectors(v, 1)) {
    return GradOutputWalk::channels;
  }
  bool dense = s.positions % kVector == 0;
  int64_t step = 1;
  for (int d = v.dims - 1; d >= 2; --d) {
    dense = dense && (v.sizes[d] == 1 || v.strides[d] == step);
    step *= v.sizes[d];
  }
  if (dense && (v.sizes[0] == 1 || v.strides[0] % kVector == 0) &&
      (v.sizes[1] == 1 || v.strides[1] % kVector == 0)) {
    return GradOutputWalk::columns;
  }
  return GradOutputWalk::elements;
}

template <typename T, GradOutputWalk walk>
LaunchError launch_walk(const TapGemmParams& p, const TapGemmShape& s, NativeStream stream) {
  const int64_t blocks = s.row_blocks * ((s.columns + kColumns - 1) / kColumns);
  if (blocks > 0x7fffffff) return kInvalidLaunch;
  launch_kernel({"tap_gemm", Lanes::synchronized}, tap_gemm_kernel<T, walk>,
                static_cast<unsigned>(blocks), kThreads, stream, p);
  return last_launch_error();
}

template <typename T>
LaunchError launch_for(const TapGemmParams& p, NativeStream stream) {
  const TapGemmShape s = shape_of(p);
  if (s.columns == 0 || s.channels == 0) return nullptr;
  switch (walk_of(p, s)) {
    case GradOutputWalk::columns: return launch_walk<T, GradOutputWalk::columns>(p, s, stream);
    case GradOutputWalk::channels: return launch_walk<T, GradOutputWalk::channels>(p, s, stream);
    case GradOutputWalk::elements: return launch_walk<T, GradOutputWalk::elements>(p, s, stream);
  }
  return kInvalidLaunch;
}

}  // namespace

template <Target target>
LaunchError launch_tap_gemm(const TapGemmParams& params, NativeStream stream) {
  if (!has_warp_mma()) {
    return "tap_gemm needs warp matrix products (CUDA sm_80 or later; not written for ROCm)";
  }
  int64_t taps = 1;
  for (int i = 0; i + 2 < params.dx_view.dims; ++i) taps *= params.filter[i];
  int64_t cell = 1;  // dx positions a grad_output position's cell holds
  for (int i = 0; i + 2 < params.dx_view.dims; ++i) cell *= params.stride[i];
  const int64_t out_channels = params.grad_output_view.sizes[1];
  const bool rows_as_stated = params.row_elements >= out_channels &&
                              params.row_elements % kVector == 0 && aligned_vectors(params.rows);
  if (taps < 1 || taps > kTapGemmMaxTaps || cell > kTapGemmMaxCell || params.dx_view.dims < 3 ||
      !rows_as_stated) {
    return kInvalidLaunch;
  }
  switch (static_cast<ElementType>(params.element)) {
    case ElementType::Float16: return launch_for<Half>(params, stream);
    case ElementType::BFloat16: return launch_for<BFloat16>(params, stream);
    default: return kInvalidLaunch;
  }
}

template LaunchError launch_tap_gemm<BWDCONV_KERNEL_TARGET>(const TapGemmParams&, NativeStream);

}  // namespace bwdconv::hip
