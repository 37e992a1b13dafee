#include "relayout.h"

#include <cstdint>

#include "launch.h"
#include "relayout_tile.h"

namespace bwdconv::hip {
namespace {

// Elements a thread moves per tile: 8 KB over the block's threads, 32 bytes.
// Blocks an SM keeps resident, asked of the compiler (at most 40 registers
// a thread; nvcc 13 keeps a thread's 16 loads in flight before its first
// shared store without spilling): 48 warps of an SM's 64.
constexpr int kRelayoutBlocksPerMultiprocessor = 6;

template <typename Bits>
constexpr int kPerThread = relayout_tile_elements(sizeof(Bits)) / kRelayoutThreads;

// The tiles of a call: `per_batch` of them for each batch matrix, row tile
// by row tile, the column tiles of a row tile consecutive.
struct RelayoutTiles {
  int64_t row_tiles;
  int64_t column_tiles;
  int64_t count;     // batches * row_tiles * column_tiles
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

// One block transposes `per_block` consecutive tiles of RelayoutTile's
// shape. Each goes through shared memory: the block loads src's rows
// [r0, r0 + 2^rows_log2) x columns [s0, s0 + 2^columns_log2), consecutive
// lanes along a row (src's contiguous dim), every load in flight before
// the first store to the tile; then it stores dst's rows, consecutive lanes
// down a column of the tile (dst's contiguous dim). Both sides' global
// accesses are runs of consecutive elements, and the column reads hit
// distinct banks (relayout_row_stride). Elements past rows or columns are
// neither read nor written.
// The tile's shape is the kernel's template argument (kRowsLog2; the
// columns fill the tile's 8 KB), so that its shared-memory offsets are
// constants: a thread's 4-16 elements then take one address register and
// immediate offsets.
template <typename Bits, int kRowsLog2>
__global__ void __launch_bounds__(kRelayoutThreads, kRelayoutBlocksPerMultiprocessor)
    relayout_kernel(RelayoutParams p, RelayoutTiles tiles) {
  constexpr int kElementsLog2 = log2_of(relayout_tile_elements(sizeof(Bits)));
  constexpr int kColumnsLog2 = kElementsLog2 - kRowsLog2;
  constexpr int tile_rows = 1 << kRowsLog2, tile_columns = 1 << kColumnsLog2;
  constexpr int stride =
      static_cast<int>(relayout_row_stride(tile_rows, tile_columns, sizeof(Bits)));
  constexpr RelayoutTile tile{kRowsLog2, kColumnsLog2, stride};
  // 8-byte words: aligned for every width.
  __shared__ uint64_t words[(relayout_tile_words(sizeof(Bits)) + 1) / 2];
  Bits* shared = reinterpret_cast<Bits*>(words);
  const Bits* src = static_cast<const Bits*>(p.src);
  Bits* dst = static_cast<Bits*>(p.dst);
  constexpr int column_mask = tile_columns - 1, row_mask = tile_rows - 1;
  const int thread = static_cast<int>(threadIdx.x);
  const int64_t first = static_cast<int64_t>(blockIdx.x) * tiles.per_block;
  const int64_t last = first + tiles.per_block < tiles.count ? first + tiles.per_block : tiles.count;
  const int64_t rest = first / tiles.column_tiles;
  TileCursor at{rest / tiles.row_tiles, rest % tiles.row_tiles, first % tiles.column_tiles};
  for (int64_t t = first; t < last; ++t, at.next(tiles)) {
    const int64_t r0 = at.row_tile << tile.rows_log2, s0 = at.column_tile << tile.columns_log2;
    // The tile's rows and columns inside the matrix.
    const int rows = static_cast<int>(p.rows - r0 < tile_rows ? p.rows - r0 : tile_rows);
    const int columns =
        static_cast<int>(p.columns - s0 < tile_columns ? p.columns - s0 : tile_columns);
    // Offsets, not pointers, until an element is accessed: a position past
    // the matrix has no address.
    const int64_t from = at.b * p.src_batch_stride + r0 * p.src_row_stride + s0;
    // Loads: column s of the tile, rows first_row, first_row + row_step, ...
    const int s = thread & column_mask, first_row = thread >> tile.columns_log2;
    constexpr int row_step = kRelayoutThreads >> tile.columns_log2;
    const int64_t load_step = row_step * p.src_row_stride;
    int64_t load = from + first_row * p.src_row_stride + s;
    Bits values[kPerThread<Bits>];
    for (int i = 0; i < kPerThread<Bits>; ++i, load += load_step) {
      const bool inside = s < columns && first_row + i * row_step < rows;
      values[i] = inside ? global_load(src + load) : Bits{};
    }
    for (int i = 0; i < kPerThread<Bits>; ++i) {
      shared[(first_row + i * row_step) * stride + s] = values[i];
    }
    __syncthreads();
    // Stores: row r of the tile, columns first_column, first_column +
    // column_step, ...
    const int r = thread & row_mask, first_column = thread >> tile.rows_log2;
    constexpr int column_step = kRelayoutThreads >> tile.rows_log2;
    const int64_t store_step = column_step * p.dst_column_stride;
    int64_t store = at.b * p.dst_batch_stride + (s0 + first_column) * p.dst_column_stride + r0 + r;
    for (int i = 0; i < kPerThread<Bits>; ++i, store += store_step) {
      const int c = first_column + i * column_step;
      if (r < rows && c < columns) global_store(dst + store, shared[r * stride + c]);
    }
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

template LaunchError launch_relayout<BWDCONV_KERNEL_TARGET>(const RelayoutParams&, NativeStream);

}  // namespace bwdconv::hip
