// Launch shapes shared by the kernels in this directory.
#pragma once

#include <cstdint>
#include <type_traits>

#include "bits.h"

namespace bwdconv::hip {

// A multiple of both the NVIDIA warp (32) and the AMD CDNA wavefront (64).
constexpr int kThreadsPerBlock = 256;
constexpr int64_t kMaxBlocks = 65535;

// Calls f(int32_t{}) when a walk's element offsets all stay below 2^31,
// f(int64_t{}) otherwise: the index type a kernel is instantiated with.
template <typename F>
void visit_index(bool narrow, F&& f) {
  if (narrow) {
    f(int32_t{});
  } else {
    f(int64_t{});
  }
}

// Calls f(Bits{}, Index{}) with the bits type of `element_bytes` (bits.h) and
// the index type `narrow` picks: the instantiation of a data-movement walk.
// False for an element width no walk moves (16 bytes: a chunk's width).
template <typename F>
bool visit_walk(int element_bytes, bool narrow, F&& f) {
  return element_bytes < 16 && visit_bits(element_bytes, [&](auto bits) {
           if constexpr (sizeof(bits) < 16) {
             visit_index(narrow, [&](auto index) { f(bits, index); });
           }
         });
}

// Calls f(std::integral_constant<int, k>{}) for the k in [kFirst, kLast]
// equal to `value` (a kernel's template argument chosen at run time); false
// when none is.
template <int kFirst, int kLast, typename F>
bool visit_constant(int value, F&& f) {
  if (value == kFirst) {
    f(std::integral_constant<int, kFirst>{});
    return true;
  }
  if constexpr (kFirst < kLast) return visit_constant<kFirst + 1, kLast>(value, f);
  return false;
}

// A row walk's step as a kernel's template argument: 1 and 2 fixed, 0 for
// any other (read at run time).
inline int fixed_step(int64_t step) { return step == 1 || step == 2 ? static_cast<int>(step) : 0; }

// The dense walks' runs (row_chunks.h, DenseRun): groups of kRunLanes
// consecutive threads (an AMD wavefront, two NVIDIA warps) take runs of
// consecutive 16-byte chunks, `passes` chunks per thread. With about
// kRunGroups groups every current GPU is full; more passes carry a thread's
// row set-up over more chunks.
constexpr int kRunLanes = 64;
constexpr int64_t kRunGroups = 16384;
constexpr int kMaxRunPasses = 64;

// Chunks of a dense walk over `total` elements, at least (its first chunk
// may start up to a chunk before dst: row_chunks.h, row_head).
inline int64_t dense_chunks(int64_t total, int lanes) { return (total + lanes - 1) / lanes + 1; }

// Passes per thread of a dense walk over `chunks` chunks: `requested` where
// positive (tests), else enough for about kRunGroups groups, 1 to
// kMaxRunPasses; never fewer than the grid's block limit needs.
inline int dense_passes(int64_t chunks, int requested) {
  const int64_t per_group = kRunLanes * kRunGroups;
  int64_t passes = (chunks + per_group - 1) / per_group;
  passes = passes < 1 ? 1 : (passes > kMaxRunPasses ? kMaxRunPasses : passes);
  if (requested > 0) passes = requested;
  const int64_t grid = kMaxBlocks * kThreadsPerBlock;
  const int64_t fit = (chunks + grid - 1) / grid;
  return static_cast<int>(passes > fit ? passes : fit);
}

// Blocks of a dense walk's grid: every chunk in some thread's run.
inline unsigned dense_blocks(int64_t chunks, int passes) {
  const int64_t per_block = int64_t{kThreadsPerBlock} * passes;
  return static_cast<unsigned>((chunks + per_block - 1) / per_block);
}

// Blocks for a grid-stride loop over `total` elements.
inline unsigned blocks_for(int64_t total) {
  int64_t blocks = (total + kThreadsPerBlock - 1) / kThreadsPerBlock;
  return static_cast<unsigned>(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

}  // namespace bwdconv::hip
