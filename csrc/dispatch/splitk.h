// splitk: the weight gradient dw[k] = sum over (n, o) of dy[n,o] * x[n, o*s + k*d - p]
// with the (n, o) reduction split into chunks, fp32 partials and a deterministic
// reduce (seed 001).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "geometry.h"

namespace bwdconv {

struct SplitKGeometry {
  int64_t batch_chunks = 1;  // chunks of the batch dim
  int64_t space_chunks = 1;  // chunks of the first output spatial dim
  int64_t chunks() const { return batch_chunks * space_chunks; }
};

// The heuristics, in one place. They start from seed 001's observations
// (tuned on AMD MI-series GPUs for IREE) and are to be re-tuned on measurements:
// - splitting pays when the reduction (batch x output space) is long compared
//   with the weight gradient it produces;
// - it has little effect when batch x output channels is already large enough
//   to fill the device;
// - it has no effect or hurts when the input's spatial size is small.
struct SplitKThresholds {
  int64_t min_reduction = 16384;         // N * prod(O) below this: no split
  int64_t min_reduction_per_output = 8;  // N * prod(O) / (dw elements / out_channels)
  int64_t large_batch_channels = 2048;   // N * out_channels at or above this: no split
  int64_t min_input_spatial = 1024;      // prod(I) below this: no split
  int64_t target_chunk = 65536;          // reduction length per chunk
  int64_t max_chunks = 64;
};

// Why splitting the reduction is not expected to pay, or nothing when it is.
std::optional<std::string> splitk_not_worth_it(const ConvGeometry& geometry,
                                               const SplitKThresholds& t = {});

// Chunk counts for the geometry (at least two chunks when the reduction allows).
SplitKGeometry make_splitk_geometry(const ConvGeometry& geometry,
                                    const SplitKThresholds& t = {});

}  // namespace bwdconv
