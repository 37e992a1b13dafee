// The tile of relayout's transpose kernel (csrc/hip/relayout.cu): its shape
// for a call and its row stride in shared memory. Plain C++ shared by the
// kernel, its launcher and the tests (tests/cpp/test_relayout_kernel.cpp).
#pragma once

#include <cstdint>

#include "portability.h"

namespace bwdconv::hip {

// A block's tile holds 8 KB of elements (4,096 of 2 bytes, 1,024 of 8), so
// that a CU of an MI300X keeps 7 blocks' tiles in its 64 KB of LDS. A side
// is a power of two from relayout_min_side to kRelayoutThreads elements:
// a thread then keeps one column of the tile as it loads and one row as it
// stores, its elements a fixed step apart.
constexpr int kRelayoutTileBytes = 8192;
constexpr int kRelayoutThreads = 256;

BWDCONV_HOST_DEVICE constexpr int relayout_tile_elements(int element_bytes) {
  return kRelayoutTileBytes / element_bytes;
}

// The shortest side: 8, or what keeps the other side within kRelayoutThreads
// (16 for 2-byte elements).
BWDCONV_HOST_DEVICE constexpr int64_t relayout_min_side(int element_bytes) {
  const int64_t least = relayout_tile_elements(element_bytes) / kRelayoutThreads;
  return least > 8 ? least : 8;
}

// log2 of the smallest power of two >= n.
BWDCONV_HOST_DEVICE constexpr int log2_of(int64_t n) {
  int log2 = 0;
  while ((int64_t{1} << log2) < n) ++log2;
  return log2;
}

// The tile: 2^rows_log2 rows of src by 2^columns_log2 columns (in shared
// memory rows relayout_row_stride elements apart).
struct RelayoutTile {
  int rows_log2 = 0;
  int columns_log2 = 0;
};

// The row stride (elements) of a tile of `rows` x `columns`. The kernel
// writes dst by reading the tile down its columns, consecutive lanes taking
// consecutive rows (and, with fewer than a pass's lanes of rows, the next
// columns): the lanes of one shared-memory pass (32; 16 for 8-byte
// elements) then read rows_per_pass rows, `span` 4-byte words of each. A
// stride of `span` times an odd number of words puts those rows' words in
// distinct banks of the 32 (docs/DESIGN.md, "relayout").
BWDCONV_HOST_DEVICE constexpr int64_t relayout_row_stride(int64_t rows, int64_t columns,
                                                          int element_bytes) {
  const int64_t lanes = element_bytes == 8 ? 16 : 32;
  const int64_t rows_per_pass = rows < lanes ? rows : lanes;
  const int64_t wide = lanes / rows_per_pass * element_bytes / 4;
  const int64_t span = wide > 1 ? wide : 1;
  const int64_t row_words = (columns * element_bytes + 3) / 4;
  int64_t spans = (row_words + span - 1) / span;
  if (spans % 2 == 0) ++spans;
  return spans * span * 4 / element_bytes;
}

// 32-bit words of shared memory the largest tile of `element_bytes` takes.
BWDCONV_HOST_DEVICE constexpr int64_t relayout_tile_words(int element_bytes) {
  const int64_t elements = relayout_tile_elements(element_bytes);
  int64_t most = 0;
  const int64_t least = relayout_min_side(element_bytes);
  for (int64_t rows = least; rows * least <= elements; rows *= 2) {
    const int64_t words = rows * relayout_row_stride(rows, elements / rows, element_bytes) *
                          element_bytes / 4;
    most = words > most ? words : most;
  }
  return most;
}

// The tile for a call: 64 x 64 two-byte elements, 32 x 64 of four bytes,
// 32 x 32 of eight, both sides read and written in runs of 128 bytes or
// more; where `rows` or `columns` is shorter than its side, that side
// shrinks to it (a power of two, at least relayout_min_side) and the other
// grows, so that few lanes sit idle on the short side.
inline RelayoutTile relayout_tile(int64_t rows, int64_t columns, int element_bytes) {
  const int elements_log2 = log2_of(relayout_tile_elements(element_bytes));
  RelayoutTile tile;
  tile.rows_log2 = element_bytes == 2 ? 6 : 5;
  tile.columns_log2 = elements_log2 - tile.rows_log2;
  const int64_t least = relayout_min_side(element_bytes);
  if (rows < (int64_t{1} << tile.rows_log2)) {
    tile.rows_log2 = log2_of(rows > least ? rows : least);
    tile.columns_log2 = elements_log2 - tile.rows_log2;
  } else if (columns < (int64_t{1} << tile.columns_log2)) {
    tile.columns_log2 = log2_of(columns > least ? columns : least);
    tile.rows_log2 = elements_log2 - tile.columns_log2;
  }
  return tile;
}

}  // namespace bwdconv::hip
