// The 16-byte chunks a row walk (row_index.h) moves, for kernel sources only
// (global_load and global_store come from portability.h's target).
#pragma once

#include <cstring>

#include "bits.h"
#include "launch.h"
#include "portability.h"
#include "row_index.h"

namespace bwdconv::hip {

// 16 bytes of a row: kLanes elements.
template <typename Bits>
struct Chunk {
  static constexpr int kLanes = 16 / sizeof(Bits);
  Bits lane[kLanes];
};

template <typename Bits>
__device__ inline Chunk<Bits> load_chunk(const Bits* at) {  // at: 16-byte aligned
  const Bits128 bits = global_load(reinterpret_cast<const Bits128*>(at));
  Chunk<Bits> chunk;
  memcpy(&chunk, &bits, sizeof chunk);
  return chunk;
}

template <typename Bits>
__device__ inline void store_chunk(Bits* at, const Chunk<Bits>& chunk) {  // at: 16-byte aligned
  Bits128 bits;
  memcpy(&bits, &chunk, sizeof bits);
  global_store(reinterpret_cast<Bits128*>(at), bits);
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

// Launches a data-movement walk over p.rows rows of p.row.size elements:
// `dense` in runs of kLanes-element chunks where dst is dense in walk order
// (p.dense; p.passes as launch.h's dense_passes takes it), else `rows`, the
// row walk. Params: ScatterParams or InterleaveParams.
template <int kLanes, typename Params>
void launch_dense_or_rows(const KernelLabel& label, void (*dense)(Params, Position),
                          void (*rows)(Params, Position), const Params& p, NativeStream stream) {
  if (p.dense) {
    const int64_t total = p.rows * p.row.size.value;
    const int64_t chunks = dense_chunks(total, kLanes);
    Params run = p;
    run.passes = dense_passes(chunks, p.passes);
    launch_kernel(label, dense, dense_blocks(chunks, run.passes), kThreadsPerBlock, stream, run,
                  static_cast<Position>(total));
  } else {
    launch_kernel(label, rows, blocks_for(p.rows << p.walk.lane_shift), kThreadsPerBlock, stream,
                  p, static_cast<Position>(p.rows));
  }
}

// Puts `value` into lane e of a chunk held as two 64-bit halves: shifts, not
// an array indexed at run time, so a loop over the lanes need not be
// unrolled to keep the chunk in registers.
template <typename Bits>
__device__ inline void put_lane(uint64_t* half, int e, Bits value) {
  const int bit = e * static_cast<int>(sizeof(Bits)) * 8;
  const uint64_t shifted = static_cast<uint64_t>(value) << (bit % 64);
  half[0] |= bit < 64 ? shifted : 0;
  half[1] |= bit < 64 ? 0 : shifted;
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
    if ((written >> e) & 1) global_store(dst + first + e, values.lane[e]);
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

}  // namespace bwdconv::hip
