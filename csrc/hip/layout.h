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

// A Divisor (params.h) for 1 <= value < 2^31.
Divisor make_divisor(int64_t value);

// The scatter's row walk over dst, the zero-inserted, padded src (views in
// logical order; stride and lead per spatial dim, DESIGN.md "scatter"): dims
// ordered by decreasing dst stride, size-1 dims that read source position 0
// dropped, one-to-one neighbours (lead 0, step 1, whole) merged, dst's
// stride-1 dim as the row. False (p untouched) when dst has no stride-1 dim,
// a position would reach 2^31, or more than kOuterDims dims remain (or four
// whose outermost is not one-to-one).
bool make_scatter_walk(const TensorView& src, const TensorView& dst, const int64_t* stride,
                       const int64_t* lead, int element_bytes, ScatterParams* p);

}  // namespace bwdconv::hip
