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

// How the kernel path (GPUs, or the host grid) cuts the reduction into chunks
// and stages the input for the vendor GEMM (docs/DESIGN.md, "splitk").
//
// A chunk is a box: `batch_per_chunk` batch rows (chunk c_n holds rows
// c_n*b, c_n*b + 1, ... below N) times `rows_per_chunk` output rows of the
// first spatial dim (the last chunk of that dim may hold fewer; every other
// output dim whole); chunk index c = c_n * space_chunks + c_s. Chunks are
// row ranges over the whole batch (b = N) unless the first dim has fewer
// rows than the wanted chunk count. Chunk c's
// partial is, per group,
//   partial[c][m, (t, column)] = sum over its positions r of dy[r, m] * staged_t[r, column]
// with fp32 (fp64) results, built in steps that each take one batch row and
// up to `step_rows` output rows of EVERY chunk: the step's input windows are
// staged as columns (in channels x staged taps per position) in one copy,
// and one batched GEMM per offset tap t multiplies all chunks at once (the
// first step writes the partials, later ones add to them).
//
// With stride 1 in the first spatial dim its taps are not staged: a step
// stages its rows plus (K0 - 1) * d0 more, and tap t's positions start
// t * d0 rows further (`offset_taps` = K0 GEMMs per step); otherwise every
// tap is staged (offset_taps = 1).
struct SplitKGemmLayout {
  int64_t batch_per_chunk = 1;
  int64_t batch_chunks = 1;
  int64_t rows_per_chunk = 1;
  int64_t space_chunks = 1;
  int64_t offset_taps = 1;
  int64_t staged_taps = 1;  // taps staged per in channel
  int64_t halo_rows = 0;    // rows staged past a step's output rows
  int64_t step_rows = 1;    // output rows per chunk and step
  int64_t chunks() const { return batch_chunks * space_chunks; }
};

// The limits the layout keeps: the partials and one step's staging in bytes
// (staging: max(staging_bytes, units x staging_bytes_per_unit), so that a
// larger device, with more chunks, stages as many rows per chunk; a step
// stages at least one output row of every chunk, whatever the cap), and the
// vendor GEMM's output tile assumed when counting how many tiles a chunk
// gives the device.
struct SplitKGemmLimits {
  int64_t partial_bytes = int64_t{64} << 20;
  int64_t staging_bytes = int64_t{16} << 20;
  int64_t staging_bytes_per_unit = int64_t{128} << 10;
  int64_t gemm_tile = 128;
};

// The staging cap of a step on a device with `units` SMs, CUs or threads.
int64_t splitk_staging_cap(int64_t units, const SplitKGemmLimits& limits = {});

// Output tiles of one chunk's product per offset tap: groups x ceil(M / tile)
// x ceil(in channels per group x staged taps / tile).
int64_t splitk_chunk_tiles(const ConvGeometry& geometry, const SplitKGemmLayout& layout,
                           const SplitKGemmLimits& limits = {});

// Elements one step stages: chunks x in channels x staged taps x
// (step rows + halo rows) x the other output dims.
int64_t splitk_step_staged_elements(const ConvGeometry& geometry, const SplitKGemmLayout& layout);

// The layout for a device with `units` SMs or CUs (or host threads): at most
// one wave of GEMM tiles,
//   chunks <= max(2, floor(units / tiles per chunk)),
// and at most what keeps the partials (chunks x weight elements x
// `partial_element_bytes`) under their cap (at least 2 chunks) and one batch
// row x one output row per chunk: first-dim row ranges, then batch ranges
// where those are too few; then as many step rows as keep a step's staging
// (`staged_element_bytes` per element) under its cap.
SplitKGemmLayout make_splitk_gemm_layout(const ConvGeometry& geometry, int64_t units,
                                         int64_t staged_element_bytes,
                                         int64_t partial_element_bytes,
                                         const SplitKGemmLimits& limits = {});

}  // namespace bwdconv
