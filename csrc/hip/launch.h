// Launch shapes shared by the kernels in this directory.
#pragma once

#include <cstdint>

#include "bits.h"

namespace bwdconv::hip {

// A multiple of both the NVIDIA warp (32) and the AMD CDNA wavefront (64).
constexpr int kThreadsPerBlock = 256;
constexpr int64_t kMaxBlocks = 65535;

// Calls f(int32_t{}) when a walk's divisions may all be narrow (index.h,
// "divide"), f(int64_t{}) otherwise: the index type a kernel is instantiated with.
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
// False for an element width no walk moves.
template <typename F>
bool visit_walk(int element_bytes, bool narrow, F&& f) {
  return visit_bits(element_bytes,
                    [&](auto bits) { visit_index(narrow, [&](auto index) { f(bits, index); }); });
}

// Blocks for a grid-stride loop over `total` elements.
inline unsigned blocks_for(int64_t total) {
  int64_t blocks = (total + kThreadsPerBlock - 1) / kThreadsPerBlock;
  return static_cast<unsigned>(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

}  // namespace bwdconv::hip
