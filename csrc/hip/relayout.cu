#include "relayout.h"

#include <cstdint>

#include "launch.h"
#include "relayout_tile.h"

namespace bwdconv::hip {
namespace {

// Blocks an SM keeps resident, asked of the compiler (at most 40 registers
// a thread; nvcc 13 keeps a thread's 16 loads in flight before its first
// shared store without spilling): 48 warps of an SM's 64.
constexpr int kRelayoutBlocksPerMultiprocessor = 6;

// The tile of `Bits` elements with 2^kRowsLog2 rows, as constants: the
// kernel's template arguments, so that its shared-memory offsets are
// immediates and a thread's 4-16 elements take one address register.
template <typename Bits, int kRowsLog2_>
struct TileShape {
  static constexpr int kRowsLog2 = kRowsLog2_;
  static constexpr int kColumnsLog2 = log2_of(relayout_tile_elements(sizeof(Bits))) - kRowsLog2;
  static constexpr int kRows = 1 << kRowsLog2, kColumns = 1 << kColumnsLog2;
  static constexpr int kStride =
      static_cast<int>(relayout_row_stride(kRows, kColumns, sizeof(Bits)));
  // Elements a thread moves: 8 KB over the block's threads, 32 bytes.
  static constexpr int kPerThread = relayout_tile_elements(sizeof(Bits)) / kRelayoutThreads;
  // Loads: a thread's column, and the rows between its elements.
  static constexpr int kRowStep = kRelayoutThreads >> kColumnsLog2;
  // Stores: a thread's row, and the columns between its elements.
  static constexpr int kColumnStep = kRelayoutThreads >> kRowsLog2;
};

// The tiles of a call: `per_batch` of them for each batch matrix, row tile
// by row tile, the column tiles of a row tile consecutive.
struct RelayoutTiles {
  int64_t row_tiles;
  int64_t column_tiles;
  int64_t count;      // batches * row_tiles * column_tiles
  int64_t per_block;  // consecutive tiles each block transposes
};

// Where a block stands: its tile's batch, row tile and column tile, moved
// on by counting (the divisions run once per block).
struct TileCursor {
  int64_t b, row_tile, column_tile;

  __device__ void next(const RelayoutTiles& tiles) {
    if (++column_tile < tiles.column_tiles) return;
    column_tile = 0;
    if (++row_tile < tiles.row_tiles) return;
    row_tile = 0;
    ++b;
  }
};

// One tile in the matrices: its first row r0 and column s0, and how many of
// its rows and columns lie inside them. Offsets, not pointers, until an
// element is accessed: a position past the matrices has no address.
struct TilePlace {
  int64_t src, dst;  // offsets of element (r0, s0) in src and in dst
  int rows, columns;
};

template <typename Shape>
__device__ inline TilePlace place_of(const RelayoutParams& p, const TileCursor& at) {
  const int64_t r0 = at.row_tile * Shape::kRows, s0 = at.column_tile * Shape::kColumns;
  TilePlace place;
  place.src = at.b * p.src_batch_stride + r0 * p.src_row_stride + s0;
  place.dst = at.b * p.dst_batch_stride + s0 * p.dst_column_stride + r0;
  place.rows = static_cast<int>(p.rows - r0 < Shape::kRows ? p.rows - r0 : Shape::kRows);
  place.columns =
      static_cast<int>(p.columns - s0 < Shape::kColumns ? p.columns - s0 : Shape::kColumns);
  return place;
}

// src's part of the tile into shared memory: this thread's column of it,
// every load in flight before the first store. A whole tile (inside the
// matrices in both dims, as all but the edge tiles are) needs no bounds:
// its elements are one pointer step apart.
template <typename Bits, typename Shape>
__device__ inline void load_tile(const RelayoutParams& p, const TilePlace& place, Bits* shared) {
  const int thread = static_cast<int>(threadIdx.x);
  const int s = thread & (Shape::kColumns - 1), first_row = thread >> Shape::kColumnsLog2;
  const int64_t step = Shape::kRowStep * p.src_row_stride;
  const int64_t first = place.src + first_row * p.src_row_stride + s;
  Bits values[Shape::kPerThread];
  if (place.rows == Shape::kRows && place.columns == Shape::kColumns) {
    const Bits* at = static_cast<const Bits*>(p.src) + first;
    for (int i = 0; i < Shape::kPerThread; ++i, at += i < Shape::kPerThread ? step : 0) {
      values[i] = global_load(at);
    }
  } else {
    const Bits* src = static_cast<const Bits*>(p.src);
    int64_t at = first;
    for (int i = 0; i < Shape::kPerThread; ++i, at += step) {
      const bool inside = s < place.columns && first_row + i * Shape::kRowStep < place.rows;
      values[i] = inside ? global_load(src + at) : Bits{};
    }
  }
  for (int i = 0; i < Shape::kPerThread; ++i) {
    shared[(first_row + i * Shape::kRowStep) * Shape::kStride + s] = values[i];
  }
}

// The tile out of shared memory into dst: this thread's row of it, read
// down the tile's columns; a whole tile without bounds, as above.
template <typename Bits, typename Shape>
__device__ inline void store_tile(const RelayoutParams& p, const TilePlace& place,
                                  const Bits* shared) {
  const int thread = static_cast<int>(threadIdx.x);
  const int r = thread & (Shape::kRows - 1), first_column = thread >> Shape::kRowsLog2;
  const int64_t step = Shape::kColumnStep * p.dst_column_stride;
  const int64_t first = place.dst + first_column * p.dst_column_stride + r;
  const Bits* from = shared + r * Shape::kStride + first_column;
  if (place.rows == Shape::kRows && place.columns == Shape::kColumns) {
    Bits* at = static_cast<Bits*>(p.dst) + first;
    for (int i = 0; i < Shape::kPerThread; ++i, at += i < Shape::kPerThread ? step : 0) {
      global_store(at, from[i * Shape::kColumnStep]);
    }
    return;
  }
  Bits* dst = static_cast<Bits*>(p.dst);
  int64_t at = first;
  for (int i = 0; i < Shape::kPerThread; ++i, at += step) {
    const int c = first_column + i * Shape::kColumnStep;
    if (r < place.rows && c < place.columns) global_store(dst + at, from[i * Shape::kColumnStep]);
  }
}

// One block transposes `per_block` consecutive tiles. Each goes through
// shared memory: the block loads src's rows of the tile with consecutive
// lanes along a row (src's contiguous dim), then stores dst's rows with
// consecutive lanes down a column of the tile (dst's contiguous dim). Both
// sides' global accesses are runs of consecutive elements, and the column
// reads hit distinct banks (relayout_row_stride). Elements past the
// matrices' rows or columns are neither read nor written.
template <typename Bits, int kRowsLog2>
__global__ void __launch_bounds__(kRelayoutThreads, kRelayoutBlocksPerMultiprocessor)
    relayout_kernel(RelayoutParams p, RelayoutTiles tiles) {
  using Shape = TileShape<Bits, kRowsLog2>;
  // 8-byte words: aligned for every width.
  __shared__ uint64_t words[(relayout_tile_words(sizeof(Bits)) + 1) / 2];
  Bits* shared = reinterpret_cast<Bits*>(words);
  const int64_t first = static_cast<int64_t>(blockIdx.x) * tiles.per_block;
  const int64_t end = first + tiles.per_block;
  const int64_t last = end < tiles.count ? end : tiles.count;
  const int64_t rest = first / tiles.column_tiles;
  TileCursor at{rest / tiles.row_tiles, rest % tiles.row_tiles, first % tiles.column_tiles};
  for (int64_t t = first; t < last; ++t, at.next(tiles)) {
    const TilePlace place = place_of<Shape>(p, at);
    load_tile<Bits, Shape>(p, place, shared);
    __syncthreads();
    store_tile<Bits, Shape>(p, place, shared);
    __syncthreads();  // the tile is read before the next one is stored
  }
}

RelayoutTiles relayout_tiles(const RelayoutParams& p, const RelayoutTile& tile) {
  RelayoutTiles tiles;
  tiles.row_tiles = (p.rows + (int64_t{1} << tile.rows_log2) - 1) >> tile.rows_log2;
  tiles.column_tiles = (p.columns + (int64_t{1} << tile.columns_log2) - 1) >> tile.columns_log2;
  tiles.count = p.batches * tiles.row_tiles * tiles.column_tiles;
  tiles.per_block = (tiles.count + kMaxBlocks - 1) / kMaxBlocks;
  return tiles;
}

// The launch of the kernel whose tile suits the call (relayout_tile).
template <typename Bits>
LaunchError launch_for(const RelayoutParams& params, NativeStream stream) {
  const RelayoutTile tile = relayout_tile(params.rows, params.columns, sizeof(Bits));
  const RelayoutTiles tiles = relayout_tiles(params, tile);
  const auto blocks = static_cast<unsigned>((tiles.count + tiles.per_block - 1) / tiles.per_block);
  LaunchError error = kInvalidLaunch;
  visit_constant<3, 8>(tile.rows_log2, [&](auto rows_log2) {
    constexpr int kRowsLog2 = decltype(rows_log2)::value;
    constexpr int64_t rows = int64_t{1} << kRowsLog2;
    constexpr int64_t least = relayout_min_side(sizeof(Bits));
    if constexpr (rows >= least && relayout_tile_elements(sizeof(Bits)) / rows >= least) {
      launch_kernel({"relayout", Lanes::synchronized}, relayout_kernel<Bits, kRowsLog2>, blocks,
                    kRelayoutThreads, stream, params, tiles);
      error = last_launch_error();
    }
  });
  return error;
}

}  // namespace

template <Target target>
LaunchError launch_relayout(const RelayoutParams& params, NativeStream stream) {
  if (params.batches < 0 || params.rows < 0 || params.columns < 0) return kInvalidLaunch;
  if (params.batches == 0 || params.rows == 0 || params.columns == 0) return nullptr;
  switch (params.element_bytes) {
    case 2: return launch_for<uint16_t>(params, stream);
    case 4: return launch_for<uint32_t>(params, stream);
    case 8: return launch_for<uint64_t>(params, stream);
  }
  return kInvalidLaunch;
}

BWDCONV_TARGET_FUNCTION(LaunchError, launch_relayout, kNoDeviceKernels, const RelayoutParams&,
                        NativeStream);

}  // namespace bwdconv::hip
