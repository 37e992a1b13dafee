// Host-side preparation of kernel views: walk order and channel packets.
#pragma once

#include <cstdint>
#include <vector>

#include "params.h"

namespace bwdconv::hip {

// A Step for a positive divisor: its shift when it is a power of two, and the
// constants of narrow division when it is below 2^31.
Step make_step(int64_t value);

// Fills view.size_steps from view.sizes (a size 0 divides as 1: such a view
// has no element to walk).
void set_size_steps(TensorView& view);

// Walks the view in memory order: size-1 dims outermost (their strides carry
// no information), then decreasing stride; ties keep logical order.
void walk_in_memory_order(TensorView& view);

// The widest packet, in elements, that moves several channels as one element:
// a power of two k with k * element_bytes <= 16 that divides every entry of
// `multiples` (channel counts and every stride except the channels' own, which
// the caller has checked to be 1) and whose bytes divide every address.
int64_t packet_elements(int element_bytes, const std::vector<int64_t>& multiples,
                        const std::vector<uintptr_t>& addresses);

// Rescales sizes/strides to packets of k channels: the channel count (and its
// size step) and every stride but the channels' (which stays 1) are divided by k.
void widen_channels(TensorView& view, int64_t k);
void widen_strides(int64_t* strides, int dims, int64_t k);

}  // namespace bwdconv::hip
