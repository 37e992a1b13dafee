#include "splitk.h"

#include "element.h"
#include "launch.h"
#include "splitk_index.h"

namespace bwdconv::hip {
namespace {

// A block computes a kTile x kTile tile of one group's weight gradient over
// one chunk, kDepth reduction steps at a time: both operand slices are
// staged in shared memory, and each thread accumulates kPerThread^2 outputs.
constexpr int kTile = 64;
constexpr int kDepth = 16;
constexpr int kPerThread = 4;
constexpr int kThreadsPerSide = kTile / kPerThread;
static_assert(kThreadsPerSide * kThreadsPerSide == kThreadsPerBlock, "one output cell per thread");
static_assert(kThreadsPerBlock % kTile == 0 && kThreadsPerBlock >= kDepth, "staging layout");

BWDCONV_HOST_DEVICE int64_t tiles(int64_t extent) { return (extent + kTile - 1) / kTile; }

template <typename T, typename Acc>
__global__ void __launch_bounds__(kThreadsPerBlock) splitk_partials_kernel(SplitKParams p) {
  __shared__ Acc grad_output_tile[kDepth][kTile];
  __shared__ Acc input_tile[kDepth][kTile];
  __shared__ int64_t batch[kDepth];  // n of each staged reduction step, -1 past the chunk
  __shared__ int64_t position[kDepth][kMaxSpatialDims];

  const int64_t tiles_m = tiles(p.out_per_group), tiles_n = tiles(p.columns);
  const int64_t tile_m = blockIdx.x % tiles_m;
  const int64_t tile_n = (blockIdx.x / tiles_m) % tiles_n;
  const int64_t group = blockIdx.x / (tiles_m * tiles_n);
  const int64_t chunk = blockIdx.y;
  const int64_t begin = chunk_begin(p.reduction, p.chunks, chunk);
  const int64_t end = chunk_begin(p.reduction, p.chunks, chunk + 1);

  // Staging: this thread loads row `lane` of the grad_output slice and column
  // `lane` of the input slice, at depths first_depth, first_depth + stride, ...
  const int lane = threadIdx.x % kTile;
  const int first_depth = threadIdx.x / kTile;
  constexpr int kDepthStride = kThreadsPerBlock / kTile;
  const int64_t row = tile_m * kTile + lane, col = tile_n * kTile + lane;
  const bool row_inside = row < p.out_per_group, col_inside = col < p.columns;
  const int64_t out_channel = group * p.out_per_group + row;
  int64_t tap[kMaxSpatialDims] = {};
  const int64_t in_channel = group * p.in_per_group + (col_inside ? column_tap(p, col, tap) : 0);
  const T* grad_output = static_cast<const T*>(p.grad_output);
  const T* input = static_cast<const T*>(p.input);

  const int cell_row = threadIdx.x / kThreadsPerSide, cell_col = threadIdx.x % kThreadsPerSide;
  Acc sum[kPerThread][kPerThread] = {};
  for (int64_t step = begin; step < end; step += kDepth) {
    if (threadIdx.x < kDepth) {
      const int64_t r = step + threadIdx.x;
      batch[threadIdx.x] = r < end ? reduction_position(p, r, position[threadIdx.x]) : -1;
    }
    __syncthreads();
    for (int depth = first_depth; depth < kDepth; depth += kDepthStride) {
      const int64_t n = batch[depth];
      Acc a = 0, b = 0;
      if (n >= 0 && row_inside) {
        a = to_accumulator<Acc>(
            global_load(grad_output + grad_output_offset(p, n, out_channel, position[depth])));
      }
      if (n >= 0 && col_inside) {
        const int64_t offset = input_offset(p, n, in_channel, position[depth], tap);
        if (offset >= 0) b = to_accumulator<Acc>(global_load(input + offset));
      }
      grad_output_tile[depth][lane] = a;
      input_tile[depth][lane] = b;
    }
    __syncthreads();
    for (int depth = 0; depth < kDepth; ++depth) {
      Acc a[kPerThread], b[kPerThread];
      for (int i = 0; i < kPerThread; ++i) {
        a[i] = grad_output_tile[depth][cell_row * kPerThread + i];
        b[i] = input_tile[depth][cell_col * kPerThread + i];
      }
      for (int i = 0; i < kPerThread; ++i) {
        for (int j = 0; j < kPerThread; ++j) sum[i][j] += a[i] * b[j];
      }
    }
    __syncthreads();
  }

  Acc* partials = static_cast<Acc*>(p.partials) +
                  chunk * p.groups * p.out_per_group * p.columns;
  for (int i = 0; i < kPerThread; ++i) {
    const int64_t m = tile_m * kTile + cell_row * kPerThread + i;
    if (m >= p.out_per_group) continue;
    for (int j = 0; j < kPerThread; ++j) {
      const int64_t c = tile_n * kTile + cell_col * kPerThread + j;
      if (c < p.columns) {
        global_store(partials + (group * p.out_per_group + m) * p.columns + c, sum[i][j]);
      }
    }
  }
}

// grad_weight[e] = partials[0][e] + partials[1][e] + ..., in chunk order.
template <typename T, typename Acc>
__global__ void __launch_bounds__(kThreadsPerBlock)
    splitk_reduce_kernel(SplitKParams p, int64_t elements) {
  const Acc* partials = static_cast<const Acc*>(p.partials);
  T* grad_weight = static_cast<T*>(p.grad_weight);
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < elements;
       e += step) {
    Acc total = 0;
    for (int64_t chunk = 0; chunk < p.chunks; ++chunk) {
      total += global_load(partials + chunk * elements + e);
    }
    global_store(grad_weight + e, FromAccumulator<T>::convert(total));
  }
}

template <typename T, typename Acc>
LaunchError launch_for(const SplitKParams& p, NativeStream stream) {
  const int64_t elements = p.groups * p.out_per_group * p.columns;
  if (elements == 0) return nullptr;
  const int64_t blocks = p.groups * tiles(p.out_per_group) * tiles(p.columns);
  if (blocks > 0x7fffffff || p.chunks < 1 || p.chunks > kMaxBlocks) return kInvalidLaunch;
  const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(p.chunks));
  launch_kernel({"splitk_partials", Lanes::synchronized}, splitk_partials_kernel<T, Acc>, grid,
                kThreadsPerBlock, stream, p);
  const LaunchError error = last_launch_error();
  if (error != nullptr) return error;
  launch_kernel({"splitk_reduce"}, splitk_reduce_kernel<T, Acc>, blocks_for(elements),
                kThreadsPerBlock, stream, p, elements);
  return last_launch_error();
}

}  // namespace

template <Target target>
LaunchError launch_splitk(const SplitKParams& params, NativeStream stream) {
  switch (static_cast<ElementType>(params.element)) {
    case ElementType::Float32: return launch_for<float, float>(params, stream);
    case ElementType::Float64: return launch_for<double, double>(params, stream);
    case ElementType::Float16: return launch_for<Half, float>(params, stream);
    case ElementType::BFloat16: return launch_for<BFloat16, float>(params, stream);
  }
  return kInvalidLaunch;
}

template LaunchError launch_splitk<BWDCONV_KERNEL_TARGET>(const SplitKParams&, NativeStream);

}  // namespace bwdconv::hip
