// Elements as raw bits: the data-movement kernels copy bits, never values, so
// one instantiation per width serves every dtype, and a 16-byte width moves
// several contiguous channels at once.
#pragma once

#include <cstdint>

namespace bwdconv::hip {

struct alignas(16) Bits128 {
  uint64_t low;
  uint64_t high;
};

// Calls f(T{}) with the unsigned type of `bytes` (2, 4, 8 or 16); false for
// any other width.
template <typename F>
bool visit_bits(int bytes, F&& f) {
  switch (bytes) {
    case 2: f(uint16_t{}); return true;
    case 4: f(uint32_t{}); return true;
    case 8: f(uint64_t{}); return true;
    case 16: f(Bits128{}); return true;
  }
  return false;
}

}  // namespace bwdconv::hip
