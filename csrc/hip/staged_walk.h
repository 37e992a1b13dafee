// The staged walk of a dense dst (scatter, interleave; for kernel sources
// only): a block stages a tile of dst in shared memory, then stores it in
// aligned 16-byte chunks, so every lane of a pass takes the same path
// whatever the row length (docs/DESIGN.md, "Kernel rules").
#pragma once

#include <type_traits>

#include "bits.h"
#include "launch.h"
#include "portability.h"
#include "row_chunks.h"
#include "row_index.h"

namespace bwdconv::hip {
// This compilation's own copy (portability.h, BWDCONV_TARGET_NAMESPACE).
inline namespace BWDCONV_TARGET_NAMESPACE {

// The source of one residue of one row of a tile: slot q of the residue
// reads row[q] for 0 <= q < extent (a stride-1 run), a zero elsewhere; with
// packets, element c of slot q's packet reads row[q * stride + c].
// Trivial: a __shared__ array of them takes no initializer.
template <typename Bits>
struct alignas(16) StagedSource {
  const Bits* row;
  Position extent;
  Position stride;
};

// Where element j of a row reads: its position w = j div packet (packet 1
// but for packets: rows along a dim whose positions are packets of a few
// elements, the row dim's), its element c = j mod packet, and slot
// q = b div step - quotient of residue b mod step, with b = w + shift >= 0
// (shift: the walk's bias less its lead, quotient: the bias's quotient;
// row_index.h, RowCursor). `size`: elements per row.
struct StagedRow {
  Divisor size;
  Divisor packet;
  Position shift;
  Position quotient;
};

// Bytes of a StagedSource, a power of two: a cursor counts in them.
constexpr uint32_t kStagedSourceBytes = 16;

// Where a lane stands in its tile, in bytes of the tile's sources: `row`,
// the offset of its row's first source (row * kStep sources from the tile's
// first row), and `b`, b * kStagedSourceBytes of its next element's
// position, `c` the element within its packet. Residue r's source then lies
// at row | r * kStagedSourceBytes (row offsets are multiples of kStep
// sources) and the slot is b div (kStep * kStagedSourceBytes): a mask and a
// shift per element for a fixed step.
struct StagedCursor {
  uint32_t row;
  uint32_t b;
  uint32_t c;

  // Into the next row where `next` (b past the row's end): `size` and
  // `row_bytes` are a row's positions and sources, scaled as the cursor is.
  __device__ void move_on(bool next, uint32_t size, uint32_t row_bytes) {
    b -= next ? size : 0;
    row += next ? row_bytes : 0;
  }

  // Into the next position where `next` (c past the packet).
  __device__ void next_position(bool next, uint32_t packet) {
    c -= next ? packet : 0;
    b += next ? kStagedSourceBytes : 0;
  }
};

// The value at a cursor: its residue's source, its slot's element (with
// kPackets, its packet's element c) or a zero.
template <typename Bits, int kStep, bool kPackets>
__device__ inline Bits staged_value(const StagedSource<Bits>* sources, const StagedRow& walk,
                                    const StagedCursor& at) {
  static_assert(sizeof(StagedSource<Bits>) == kStagedSourceBytes, "a cursor counts sources");
  const uint32_t residue = at.b / kStagedSourceBytes % kStep;
  const StagedSource<Bits>& source = *reinterpret_cast<const StagedSource<Bits>*>(
      reinterpret_cast<const char*>(sources) + (at.row | residue * kStagedSourceBytes));
  const uint32_t q = at.b / (kStep * kStagedSourceBytes) - static_cast<uint32_t>(walk.quotient);
  const uint32_t offset = kPackets ? q * static_cast<uint32_t>(source.stride) + at.c : q;
  return q < static_cast<uint32_t>(source.extent) ? global_load(source.row + offset) : Bits{};
}

// Stages and stores dst's tiles of kStagedTileBytes, one per block and pass
// of a grid-stride loop over `tiles`; `describe(row, residue)` gives a
// row's residue its StagedSource (rows outside dst: extent 0). kStep: the
// step of the dim along the rows (2); kPackets: its positions are packets
// of walk.packet elements. Rows are at least a chunk long and short enough
// that a tile spans at most kStagedSources / kStep of them (make_*_walk).
//   1. The tile's sources, one per thread.
//   2. Every lane reads kPack consecutive elements per round, kPack * 256
//      elements apart from round to round, and writes them to the tile:
//      additions and comparisons per element (and a division per lane and
//      tile with packets).
//   3. The tile goes out in aligned 16-byte chunks (lane by lane only at
//      dst's ends).
template <typename Bits, int kStep, bool kPackets, typename Describe>
__device__ inline void staged_walk(Bits* dst, Position total, const StagedRow& walk,
                                   Describe describe) {
  constexpr int kLanes = Chunk<Bits>::kLanes;
  constexpr int kTile = kStagedTileBytes / static_cast<int>(sizeof(Bits));
  // consecutive elements a lane stages together: a 32-bit word of 2-byte
  // elements, else one
  constexpr int kPack = sizeof(Bits) == 2 ? 2 : 1;
  constexpr int kAdvance = kThreadsPerBlock * kPack;  // elements from round to round
  constexpr int kRounds = kTile / kAdvance;
  constexpr int kChunks = kTile / kLanes;
  __shared__ StagedSource<Bits> sources[kStagedSources];
  __shared__ Bits128 tile[kChunks];
  const Position size = static_cast<Position>(walk.size.value);
  const Position packet = static_cast<Position>(walk.packet.value);
  // a row's positions, its first b past its end and its sources, and a
  // round's advance in whole rows, positions and packet elements: as a
  // cursor counts
  constexpr uint32_t kScale = kStagedSourceBytes;
  const Position positions = kPackets ? divide_position(size, walk.packet) : size;
  const uint32_t row_size = static_cast<uint32_t>(positions) * kScale;
  const uint32_t end = row_size + static_cast<uint32_t>(walk.shift) * kScale;
  constexpr uint32_t kRowBytes = kStep * kStagedSourceBytes;
  const Position advance_rows = divide_position(kAdvance, walk.size);
  const Position advance_elements = kAdvance - advance_rows * size;
  const Position advance_positions =
      kPackets ? divide_position(advance_elements, walk.packet) : advance_elements;
  const uint32_t advance_row = static_cast<uint32_t>(advance_rows) * kRowBytes;
  const uint32_t advance_b = static_cast<uint32_t>(advance_positions) * kScale;
  const uint32_t advance_c = static_cast<uint32_t>(advance_elements - advance_positions * packet);
  // Tile t holds dst elements t * kTile - head ...: chunks aligned in memory.
  const Position head = row_head(dst);
  const Position tiles = (total + head + kTile - 1) / kTile;
  // the lane's first element past the tile's first, as whole rows and elements
  const Position lane_first = static_cast<Position>(threadIdx.x) * kPack;
  const Position lane_rows = divide_position(lane_first, walk.size);
  const Position lane_elements = lane_first - lane_rows * size;
  const Position grid = gridDim.x;  // read once: on AMD it is a division
  for (Position t = blockIdx.x; t < tiles; t += grid) {
    const Position first = t * kTile - head;
    // the row of the tile's first element: -1 for the elements before dst
    const Position row0 = first < 0 ? -1 : divide_position(first, walk.size);
    const Position span = divide_position(first + kTile - 1 - row0 * size, walk.size) + 1;
    if (static_cast<Position>(threadIdx.x) < span * kStep) {
      sources[threadIdx.x] = describe(row0 + static_cast<Position>(threadIdx.x) / kStep,
                                      static_cast<Position>(threadIdx.x) % kStep);
    }
    __syncthreads();
    // the lane's row (from row0) and element: the tile's first element's
    // and the lane's own, carried once
    const Position sum = first - row0 * size + lane_elements;
    const bool carries = sum >= size;
    const Position row = lane_rows + carries;
    const Position element = carries ? sum - size : sum;
    const Position position = kPackets ? divide_position(element, walk.packet) : element;
    // carried by additions from here on (opaque: not re-derived from the divisions)
    StagedCursor at{opaque(static_cast<uint32_t>(row) * kRowBytes),
                    opaque(static_cast<uint32_t>(position + walk.shift) * kScale),
                    opaque(static_cast<uint32_t>(element - position * packet))};
    // every round's loads before the tile's stores
    using Pack = std::conditional_t<kPack == 2, uint32_t, Bits>;
    Pack packs[kRounds];
    for (int k = 0; k < kRounds; ++k) {
      StagedCursor next = at;
      packs[k] = 0;
      for (int e = 0; e < kPack; ++e) {
        const Bits value = staged_value<Bits, kStep, kPackets>(sources, walk, next);
        packs[k] |= static_cast<Pack>(value) << (e * 8 * sizeof(Bits));
        if (e + 1 < kPack) {
          // the pack's next element, which may start the next position and row
          if constexpr (kPackets) {
            ++next.c;
            next.next_position(next.c == static_cast<uint32_t>(packet), packet);
          } else {
            next.b += kScale;
          }
          next.move_on(next.b == end, row_size, kRowBytes);
        }
      }
      if constexpr (kPackets) {
        at.c += advance_c;
        at.next_position(at.c >= static_cast<uint32_t>(packet), packet);
      }
      at.row += advance_row;
      at.b += advance_b;
      at.move_on(at.b >= end, row_size, kRowBytes);
    }
    for (int k = 0; k < kRounds; ++k) {
      reinterpret_cast<Pack*>(tile)[threadIdx.x + k * kThreadsPerBlock] = packs[k];
    }
    __syncthreads();
    for (int k = 0; k < kChunks / kThreadsPerBlock; ++k) {
      const Position c = static_cast<Position>(threadIdx.x) + k * kThreadsPerBlock;
      const Position at_first = first + c * kLanes;
      const Chunk<Bits> chunk = chunk_of<Bits>(tile[c]);
      if (at_first >= 0 && at_first + kLanes <= total) {
        store_chunk(dst + at_first, chunk);
      } else {
        for (int e = 0; e < kLanes; ++e) {
          const Position j = at_first + e;
          if (j >= 0 && j < total) global_store(dst + j, chunk.get(e));
        }
      }
    }
    __syncthreads();  // the next tile's sources and values overwrite these
  }
}

}  // namespace BWDCONV_TARGET_NAMESPACE
}  // namespace bwdconv::hip
