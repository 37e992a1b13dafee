// The 16-byte chunks a row walk (row_index.h) moves, for kernel sources only
// (global_load and global_store come from portability.h's target).
#pragma once

#include "bits.h"
#include "launch.h"
#include "portability.h"
#include "row_index.h"

namespace bwdconv::hip {
// This compilation's own copy (portability.h, BWDCONV_TARGET_NAMESPACE).
inline namespace BWDCONV_TARGET_NAMESPACE {

// 16 bytes of a row: kLanes elements, held as four 32-bit words that lanes
// go into and out of by shifts and selects, so a chunk stays in registers
// whatever path built it, even for a lane chosen at run time (an array of
// lanes copied through memcpy does not: the compilers split it into bytes
// where two paths' chunks meet).
template <typename Bits>
struct Chunk {
  static constexpr int kLanes = 16 / sizeof(Bits);
  static constexpr int kLaneBits = 8 * sizeof(Bits);
  static constexpr int kWords = 4;
  uint32_t word[kWords] = {0, 0, 0, 0};

  // Puts `value` into lane e, which holds zeros.
  __device__ void put(int e, Bits value) {
    if constexpr (kLaneBits == 64) {
      for (int w = 0; w < kWords; ++w) {
        word[w] |= e == w / 2 ? static_cast<uint32_t>(value >> (w % 2 * 32)) : 0;
      }
    } else {
      constexpr int kPerWord = 32 / kLaneBits;
      const uint32_t shifted = static_cast<uint32_t>(value) << (e % kPerWord * kLaneBits);
      for (int w = 0; w < kWords; ++w) word[w] |= e / kPerWord == w ? shifted : 0;
    }
  }

  __device__ Bits get(int e) const {
    if constexpr (kLaneBits == 64) {
      const int w = 2 * e;
      const uint32_t low = w == 0 ? word[0] : word[2];
      const uint32_t high = w == 0 ? word[1] : word[3];
      return static_cast<Bits>(static_cast<uint64_t>(high) << 32 | low);
    } else {
      constexpr int kPerWord = 32 / kLaneBits;
      const int w = e / kPerWord;
      const uint32_t held = w == 0 ? word[0] : w == 1 ? word[1] : w == 2 ? word[2] : word[3];
      return static_cast<Bits>(held >> (e % kPerWord * kLaneBits));
    }
  }

  // The lanes of `other` too (where this chunk holds zeros).
  __device__ void merge(const Chunk& other) {
    for (int w = 0; w < kWords; ++w) word[w] |= other.word[w];
  }

  // Every lane moved one lane up where `up`: lane e + 1 takes lane e. Only
  // for chunks whose odd lanes hold zeros.
  __device__ void shift_odd(bool up) {
    if constexpr (kLaneBits == 16) {
      for (int w = 0; w < kWords; ++w) word[w] = up ? word[w] << 16 : word[w];
    } else if constexpr (kLaneBits == 32) {  // lanes 1 and 3 take lanes 0 and 2
      word[3] = up ? word[2] : word[3];
      word[2] = up ? 0 : word[2];
      word[1] = up ? word[0] : word[1];
      word[0] = up ? 0 : word[0];
    } else {  // 64 bits: lane 1 (words 2, 3) takes lane 0 (words 0, 1)
      word[3] = up ? word[1] : word[3];
      word[2] = up ? word[0] : word[2];
      word[1] = up ? 0 : word[1];
      word[0] = up ? 0 : word[0];
    }
  }
};

// The chunk that 16 bytes of memory hold.
template <typename Bits>
__device__ inline Chunk<Bits> chunk_of(const Bits128& bits) {
  Chunk<Bits> chunk;
  chunk.word[0] = static_cast<uint32_t>(bits.low);
  chunk.word[1] = static_cast<uint32_t>(bits.low >> 32);
  chunk.word[2] = static_cast<uint32_t>(bits.high);
  chunk.word[3] = static_cast<uint32_t>(bits.high >> 32);
  return chunk;
}

template <typename Bits>
__device__ inline Chunk<Bits> load_chunk(const Bits* at) {  // at: 16-byte aligned
  return chunk_of<Bits>(global_load(reinterpret_cast<const Bits128*>(at)));
}

template <typename Bits>
__device__ inline void store_chunk(Bits* at, const Chunk<Bits>& chunk) {  // at: 16-byte aligned
  const auto pair = [&](int w) {
    return static_cast<uint64_t>(chunk.word[w + 1]) << 32 | chunk.word[w];
  };
  global_store(reinterpret_cast<Bits128*>(at), Bits128{pair(0), pair(2)});
}

// The chunks one thread of a dense walk takes: its group of kRunLanes
// consecutive threads takes `passes` x kRunLanes consecutive chunks, lane l
// the chunks l, l + kRunLanes, ..., so on every pass the lanes of a warp
// store consecutive chunks, and a thread's next chunk lies kRunLanes chunks
// on (the row cursor gets there by additions, row_index.h RowMove).
struct DenseRun {
  Position chunk;  // this pass's
  Position end;    // past the thread's last chunk

  __device__ DenseRun(Position passes, Position chunks) {
    const Position thread = blockIdx.x * kThreadsPerBlock + threadIdx.x;
    const Position group_first = thread / kRunLanes * kRunLanes * passes;
    const Position group_end = group_first + kRunLanes * passes;
    chunk = group_first + thread % kRunLanes;
    end = group_end < chunks ? group_end : chunks;
  }

  __device__ void next() { chunk += kRunLanes; }
};

// The kernels of a data-movement walk (Params: ScatterParams or
// InterleaveParams): the row walk and the dense walk, and the label their
// launches carry.
template <typename Params>
struct WalkKernels {
  const char* name;
  void (*rows)(Params, Position);
  void (*dense)(Params, Position);
};

// Launches a data-movement walk over p.rows rows of p.row.size elements:
// where dst is dense in walk order (p.dense), the dense walk in runs of
// kLanes-element chunks (p.passes as launch.h's dense_passes takes it),
// else the row walk.
template <int kLanes, typename Params>
void launch_walk_kernels(const WalkKernels<Params>& kernels, const Params& p, NativeStream stream) {
  const int64_t total = p.rows * p.row.size.value;
  if (p.dense) {
    const int64_t chunks = dense_chunks(total, kLanes);
    Params run = p;
    run.passes = dense_passes(chunks, p.passes);
    launch_kernel({kernels.name}, kernels.dense, dense_blocks(chunks, run.passes),
                  kThreadsPerBlock, stream, run, static_cast<Position>(total));
  } else {
    launch_kernel({kernels.name}, kernels.rows, blocks_for(p.rows << p.walk.lane_shift),
                  kThreadsPerBlock, stream, p, static_cast<Position>(p.rows));
  }
}

// Stores lane e of `values` at dst[first + e] where bit e of `written` is
// set: one 16-byte store when every bit is (dst + first is then a 16-byte
// aligned chunk of dst), else lane by lane.
template <typename Bits>
__device__ inline void store_lanes(Bits* dst, Position first, const Chunk<Bits>& values,
                                   unsigned written) {
  constexpr int kLanes = Chunk<Bits>::kLanes;
  if (written == (1u << kLanes) - 1) {
    store_chunk(dst + first, values);
    return;
  }
  for (int e = 0; e < kLanes; ++e) {
    if ((written >> e) & 1) global_store(dst + first + e, values.get(e));
  }
}

// src_row[at * stride] for 0 <= at < size, else a zero; the load itself stays
// inside the row (at clamped), so no lane branches around it.
template <typename Bits, typename Index>
__device__ inline Bits load_or_zero(const Bits* src_row, Position at, Index stride, Position size) {
  const Position inside = at < 0 ? 0 : (at < size ? at : size - 1);
  const Bits value = global_load(src_row + inside * stride);
  return at == inside ? value : Bits{};
}

// The first chunk of a row that starts `head` elements past a 16-byte
// boundary lies at -head: the row's elements in memory before the row.
template <typename Bits>
__device__ inline Position row_head(const Bits* row) {
  return static_cast<Position>((reinterpret_cast<uintptr_t>(row) / sizeof(Bits)) %
                               Chunk<Bits>::kLanes);
}

// The first chunk at or after c_begin that `lane` of a row's `lanes` threads
// writes: lane l takes the chunks that lie l chunks into a (lanes * 16)-byte
// block of memory, so the threads of a row store whole 32-byte sectors
// together.
template <typename Bits>
__device__ inline Position first_chunk(const Bits* row, Position head, Position lane,
                                       Position lanes, Position c_begin) {
  const uintptr_t chunk_zero =
      reinterpret_cast<uintptr_t>(row) - static_cast<uintptr_t>(head) * sizeof(Bits);
  const Position block = static_cast<Position>((chunk_zero / sizeof(Bits128)) & (lanes - 1));
  return c_begin + ((lane - block - c_begin) & (lanes - 1));
}

// Whether dst row `dst` can be copied from source row `src` by aligned
// 16-byte chunks when dst position j reads source position j + shift.
template <typename Bits>
__device__ inline bool chunks_align(const Bits* src, const Bits* dst, Position shift) {
  return (reinterpret_cast<uintptr_t>(src) - reinterpret_cast<uintptr_t>(dst) +
          static_cast<uintptr_t>(shift) * sizeof(Bits)) %
             sizeof(Bits128) ==
         0;
}

}  // namespace BWDCONV_TARGET_NAMESPACE
}  // namespace bwdconv::hip
