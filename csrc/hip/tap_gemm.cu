#include "tap_gemm.h"

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
    s.taps *= p.weight_view.sizes[2 + i];
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

// What a block computes once and every stage of it reads: for each of its
// rows (channel c, tap t) and columns (n, q), where in the weight, grad_output
// and dx they lie.
struct TapGemmTiles {
  alignas(32) uint16_t a[kRows][kDepth + kPad];     // taps' filter: [c, t] x o
  alignas(32) uint16_t b[kDepth][kColumns + kPad];  // grad_output: o x [n, q]
  alignas(32) float sums[kRows][kColumns + kPad];
  int64_t row_weight[kRows];  // offset of w[0, c, t]; -1: the row is empty
  int64_t row_dx[kRows];      // offset of dx[0, c, 0...]
  int64_t column_grad_output[kColumns];     // offset of dy[n, 0, q]; -1: no column
  int64_t column_dx[kColumns];              // offset of dx[n, 0, 0...]
  int32_t column_first[kMaxSpatialDims][kColumns];  // s_i * q_i - p_i
};

// Row r of the block: channel c = first + r / T, tap t = r % T (row-major
// over the filter, the last dim's taps adjacent).
__device__ inline void describe_row(const TapGemmParams& p, const TapGemmShape& s,
                                    int64_t first_channel, int r, TapGemmTiles& tiles) {
  const int64_t c = first_channel + r / s.taps;
  if (r >= s.channels_per_block * s.taps || c >= s.channels) {
    tiles.row_weight[r] = -1;
    return;
  }
  int64_t t = r % s.taps, weight = c * p.weight_view.strides[1];
  for (int i = s.spatial_dims - 1; i >= 0; --i) {
    const int64_t k = p.weight_view.sizes[2 + i], tap = t % k;
    t /= k;
    weight += tap * p.weight_view.strides[2 + i];
  }
  tiles.row_weight[r] = weight;
  tiles.row_dx[r] = c * p.dx_view.strides[1];
}

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

// Each thread's share of one slice of both operands, held in registers
// between its global loads and its stores to shared memory.
constexpr int kSliceShare = kRows * kDepth / kThreads;
static_assert(kRows * kDepth == kDepth * kColumns, "both operands' slices are the same size");

struct OperandShare {
  uint16_t a[kSliceShare];
  uint16_t b[kSliceShare];
};

// Which elements of a slice a thread takes: the same column of the slice
// (`fixed`: k of the weight's, j or k of grad_output's) in every turn, the
// other index stepping by `step` from `first`.
struct SliceWalk {
  int fixed, first, step;
};

// Weight slice [r][k]: k = lane % kDepth fixed, r from lane / kDepth.
__device__ inline SliceWalk weight_walk() {
  return {static_cast<int>(threadIdx.x) % kDepth, static_cast<int>(threadIdx.x) / kDepth,
          kThreads / kDepth};
}

// grad_output slice [k][j]: j fixed and k stepping in NCHW (columns
// inner), k fixed and j stepping where the channels are inner.
__device__ inline SliceWalk grad_output_walk(bool channels_inner) {
  const int lane = static_cast<int>(threadIdx.x);
  return channels_inner ? SliceWalk{lane % kDepth, lane / kDepth, kThreads / kDepth}
                        : SliceWalk{lane % kColumns, lane / kColumns, kThreads / kColumns};
}

// The block's slice [first_o, first_o + kDepth) of both operands, from
// global memory into this thread's registers: zeros past O and outside the
// block's rows and columns. Consecutive threads read consecutive elements:
// the weight (in rows, O contiguous) along O; grad_output along its columns
// (NCHW), or along the channels where those are its stride-1 dim.
template <typename T>
__device__ inline void fetch_slice(const TapGemmParams& p, const TapGemmShape& s, int64_t first_o,
                                   const TapGemmTiles& tiles, OperandShare& share) {
  // Offsets, not pointers, until an element is read: a row or column
  // outside the tensors has no address.
  const SliceWalk a = weight_walk();
  const int64_t a_channel = first_o + a.fixed;
  const T* weight = static_cast<const T*>(p.weight);
  const int64_t a_offset = a_channel * p.weight_view.strides[0];
  for (int i = 0; i < kSliceShare; ++i) {
    const int64_t at = tiles.row_weight[a.first + i * a.step];
    share.a[i] = at >= 0 && a_channel < s.out_channels ? global_load(weight + a_offset + at).bits
                                                        : uint16_t{0};
  }
  const T* grad_output = static_cast<const T*>(p.grad_output);
  const int64_t channel_stride = p.grad_output_view.strides[1];
  const SliceWalk b = grad_output_walk(channel_stride == 1);
  if (channel_stride == 1) {  // k fixed, j stepping
    const int64_t o = first_o + b.fixed;
    for (int i = 0; i < kSliceShare; ++i) {
      const int64_t at = tiles.column_grad_output[b.first + i * b.step];
      share.b[i] = at >= 0 && o < s.out_channels ? global_load(grad_output + at + o).bits
                                                 : uint16_t{0};
    }
    return;
  }
  const int64_t at = tiles.column_grad_output[b.fixed];  // j fixed, k stepping
  const int64_t column = at + (first_o + b.first) * channel_stride;
  for (int i = 0; i < kSliceShare; ++i) {
    const bool inside = at >= 0 && first_o + b.first + i * b.step < s.out_channels;
    share.b[i] = inside ? global_load(grad_output + column + i * b.step * channel_stride).bits
                        : uint16_t{0};
  }
}

// This thread's share of a slice into the shared tiles (fetch_slice's places).
__device__ inline void stage_slice(const TapGemmParams& p, const OperandShare& share,
                                   TapGemmTiles& tiles) {
  const SliceWalk a = weight_walk();
  const bool channels_inner = p.grad_output_view.strides[1] == 1;
  const SliceWalk b = grad_output_walk(channels_inner);
  for (int i = 0; i < kSliceShare; ++i) {
    tiles.a[a.first + i * a.step][a.fixed] = share.a[i];
    const int moving = b.first + i * b.step;
    if (channels_inner) {
      tiles.b[b.fixed][moving] = share.b[i];
    } else {
      tiles.b[moving][b.fixed] = share.b[i];
    }
  }
}

// The tap a dx position at offset r of its cell reaches in one dim (r = t*d),
// or -1 where none does (a hole).
__device__ inline int tap_at(int r, int dilation, int taps) {
  if (r % dilation != 0) return -1;
  return r / dilation < taps ? r / dilation : -1;
}

// The epilogue writes whole cells: the cell of grad_output position q is
// dx's positions s*q - p + r, 0 <= r < s per dim, and holds q's products,
// dx[n, c, s*q + t*d - p] = sums[(c, t)][(n, q)] at r = t*d (docs/DESIGN.md,
// "swap1x1"; the taps lie within the stride), and zeros at its other
// offsets, the holes. The cells of all q cover dx but for a tail past
// s*O - p (cells_cover_dx), so dx needs no zeroing pass otherwise.
// Consecutive threads take a cell row's offsets, then the next column's:
// in NCHW they write consecutive elements of a dx row.
template <typename T>
__device__ inline void write_cells(const TapGemmParams& p, const TapGemmShape& s,
                                   const TapGemmTiles& tiles) {
  T* dx = static_cast<T*>(p.dx);
  const int last = s.spatial_dims - 1;
  int cell_outer = 1;  // offsets of the outer dims' cells
  for (int i = 0; i < last; ++i) cell_outer *= static_cast<int>(p.stride[i]);
  const int stride_last = static_cast<int>(p.stride[last]);
  const int channels = static_cast<int>(s.channels_per_block);
  // At most 64 * 64 * kTapGemmMaxCell elements: 32-bit arithmetic.
  const int elements = channels * cell_outer * kColumns * stride_last;
  for (int e = threadIdx.x; e < elements; e += kThreads) {
    int rest = e / stride_last;
    const int j = rest % kColumns;
    rest /= kColumns;
    const int channel = rest / cell_outer;
    int outer = rest % cell_outer, tap = 0, taps_before = 1;
    const int first_row = channel * static_cast<int>(s.taps);
    if (tiles.row_weight[first_row] < 0 || tiles.column_grad_output[j] < 0) continue;
    int64_t offset = tiles.column_dx[j] + tiles.row_dx[first_row];
    bool inside = true, a_tap = true;
    for (int i = last; i >= 0; --i) {
      const int stride = static_cast<int>(p.stride[i]);
      const int r = i == last ? e % stride_last : outer % stride;
      if (i != last) outer /= stride;
      const int64_t x = int64_t{tiles.column_first[i][j]} + r;
      inside = inside && x >= 0 && x < p.dx_view.sizes[2 + i];
      offset += x * p.dx_view.strides[2 + i];
      const int taps = static_cast<int>(p.weight_view.sizes[2 + i]);
      const int t = tap_at(r, static_cast<int>(p.dilation[i]), taps);
      a_tap = a_tap && t >= 0;
      tap += t * taps_before;  // row-major over the taps, the last dim fastest
      taps_before *= taps;
    }
    if (!inside) continue;
    const float value = a_tap ? tiles.sums[first_row + tap][j] : 0.0f;
    global_store(dx + offset, FromAccumulator<T>::convert(value));
  }
}

template <typename T>
__device__ inline void tap_gemm_block(const TapGemmParams& p) {
  __shared__ TapGemmTiles tiles;
  const TapGemmShape s = shape_of(p);
  // Consecutive blocks share a column tile (its grad_output slice is read
  // again from cache), stepping through the channel blocks.
  const int64_t block = blockIdx.x;
  const int64_t first_channel = (block % s.row_blocks) * s.channels_per_block;
  const int64_t first_column = (block / s.row_blocks) * kColumns;
  for (int r = threadIdx.x; r < kRows; r += kThreads) describe_row(p, s, first_channel, r, tiles);
  for (int j = threadIdx.x; j < kColumns; j += kThreads) {
    describe_column(p, s, first_column, j, tiles);
  }
  const int warp = threadIdx.x / kWarpLanes;
  const int warp_row = (warp / 2) * kWarpRows, warp_column = (warp % 2) * kWarpColumns;
  MmaAccumulator sums[2][2];
  for (auto& row : sums) {
    for (MmaAccumulator& c : row) mma_zero(c);
  }
  __syncthreads();
  // Software pipeline: the next slice's global loads are in flight while the
  // warps multiply the slice in shared memory.
  OperandShare share;
  fetch_slice<T>(p, s, 0, tiles, share);
  for (int64_t first_o = 0; first_o < s.out_channels; first_o += kDepth) {
    stage_slice(p, share, tiles);
    __syncthreads();
    if (first_o + kDepth < s.out_channels) fetch_slice<T>(p, s, first_o + kDepth, tiles, share);
    for (int k = 0; k < kDepth; k += kMmaTile) {
      MmaA<T> a[2];
      MmaB<T> b[2];
      for (int i = 0; i < 2; ++i) mma_load<T>(a[i], &tiles.a[warp_row + i * kMmaTile][k], kDepth + kPad);
      for (int j = 0; j < 2; ++j) {
        mma_load<T>(b[j], &tiles.b[k][warp_column + j * kMmaTile], kColumns + kPad);
      }
      for (int i = 0; i < 2; ++i) {
        for (int j = 0; j < 2; ++j) mma<T>(sums[i][j], a[i], b[j]);
      }
    }
    __syncthreads();
  }
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 2; ++j) {
      mma_store(&tiles.sums[warp_row + i * kMmaTile][warp_column + j * kMmaTile], sums[i][j],
                kColumns + kPad);
    }
  }
  __syncthreads();
  write_cells<T>(p, s, tiles);
}

#endif  // BWDCONV_WARP_MMA

// Empty where this compilation has no warp matrix products (its launcher
// refuses before launching).
template <typename T>
__global__ void __launch_bounds__(kThreads) tap_gemm_kernel(TapGemmParams p) {
#if defined(BWDCONV_WARP_MMA)
  tap_gemm_block<T>(p);
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

template <typename T>
LaunchError launch_for(const TapGemmParams& p, NativeStream stream) {
  const TapGemmShape s = shape_of(p);
  if (s.columns == 0 || s.channels == 0) return nullptr;
  const int64_t blocks = s.row_blocks * ((s.columns + kColumns - 1) / kColumns);
  if (blocks > 0x7fffffff) return kInvalidLaunch;
  launch_kernel({"tap_gemm", Lanes::synchronized}, tap_gemm_kernel<T>,
                static_cast<unsigned>(blocks), kThreads, stream, p);
  return last_launch_error();
}

}  // namespace

template <Target target>
LaunchError launch_tap_gemm(const TapGemmParams& params, NativeStream stream) {
  if (!has_warp_mma()) {
    return "tap_gemm needs warp matrix products (CUDA sm_80 or later; not written for ROCm)";
  }
  int64_t taps = 1;
  for (int i = 2; i < params.weight_view.dims; ++i) taps *= params.weight_view.sizes[i];
  int64_t cell = 1;  // dx positions a grad_output position's cell holds
  for (int i = 0; i + 2 < params.dx_view.dims; ++i) cell *= params.stride[i];
  if (taps < 1 || taps > kTapGemmMaxTaps || cell > kTapGemmMaxCell || params.dx_view.dims < 3) {
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
