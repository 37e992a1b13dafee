// A count of the bytes c10's CPU allocator hands out, for the memory measure
// of python/bwdconv/_memory.py (docs/DESIGN.md, "Memory").
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>

namespace bwdconv::ops {

// Starts counting: the first start puts a counting allocator in front of
// c10's CPU allocator; starts nest, and the last stop puts the original one
// back, at its own priority. Every thread's allocations are counted while it
// is in front. Nothing changes while no count runs.
void start_counting_cpu_bytes();
void stop_counting_cpu_bytes();

// Bytes of the counted allocations not yet freed (freed after the count
// stopped included), and their highest value since the last reset.
int64_t counted_cpu_bytes();
int64_t counted_cpu_peak();
// The peak starts again from the bytes counted now.
void reset_counted_cpu_peak();

void register_memory_bindings(pybind11::module& m);

}  // namespace bwdconv::ops
