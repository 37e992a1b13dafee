#include "tap_gemm.h"

#include <cstdint>
#include <type_traits>

#include "bits.h"
#include "element.h"
#include "warp_mma.h"

namespace bwdconv::hip {
namespace {

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

// How a block reads its slices of grad_output, chosen per call from its
// strides (walk_of): 16-byte loads of 8 consecutive columns (positions dense
// and row-major, Q a multiple of 8: NCHW) or of 8 consecutive channels
// (channels_last, O a multiple of 8), else one element per load. The filter's
// rows are always read 16 bytes at a time (TapGemmParams).
enum class GradOutputWalk { columns, channels, elements };

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
};

template <typename T>
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
  return l;
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
      const uint16_t low = FromAccumulator<T>::convert(value_at(r)).bits;
      const uint16_t high = FromAccumulator<T>::convert(value_at(r + 1)).bits;
      global_store(reinterpret_cast<uint32_t*>(dx + at), uint32_t{low} | uint32_t{high} << 16);
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
      write_run<T>(p, s, tiles, first_channel, e % channels, o, run_last<T>(p, s, column), column,
                   true);
    }
    return;
  }
  const RunColumn column = run_column(s, tiles, static_cast<int>(threadIdx.x) % kColumns);
  if (!column.exists) return;
  const RunLast l = run_last<T>(p, s, column);
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
