#include "splitk.h"

#include <algorithm>

namespace bwdconv {
namespace {

int64_t product(const SpatialSizes& sizes, int spatial_dims) {
  int64_t p = 1;
  for (int i = 0; i < spatial_dims; ++i) p *= sizes[i];
  return p;
}

int64_t reduction_length(const ConvGeometry& g) {
  return g.batch * product(g.output, g.spatial_dims);
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Output positions of one first-dim row: the product of the other output dims.
int64_t row_positions(const ConvGeometry& g) {
  int64_t p = 1;
  for (int i = 1; i < g.spatial_dims; ++i) p *= g.output[i];
  return p;
}

}  // namespace

std::optional<std::string> splitk_not_worth_it(const ConvGeometry& g,
                                               const SplitKThresholds& t) {
  const int64_t reduction = reduction_length(g);
  const int64_t per_output_channel = g.filter_in_channels * product(g.filter, g.spatial_dims);
  if (reduction < t.min_reduction) {
    return "the reduction batch x output space (" + std::to_string(reduction) +
           ") is shorter than " + std::to_string(t.min_reduction);
  }
  if (reduction < t.min_reduction_per_output * per_output_channel) {
    return "the reduction (" + std::to_string(reduction) + ") is short next to the " +
           std::to_string(per_output_channel) + " weight-gradient values per output channel";
  }
  if (g.batch * g.out_channels >= t.large_batch_channels) {
    return "batch x output channels (" + std::to_string(g.batch * g.out_channels) +
           ") already fills the device";
  }
  if (product(g.input, g.spatial_dims) < t.min_input_spatial) {
    return "the input's spatial size (" + std::to_string(product(g.input, g.spatial_dims)) +
           ") is small";
  }
  return std::nullopt;
}

SplitKGeometry make_splitk_geometry(const ConvGeometry& g, const SplitKThresholds& t) {
  const int64_t wanted =
      std::clamp<int64_t>(reduction_length(g) / t.target_chunk, 2, t.max_chunks);
  SplitKGeometry sk;
  sk.batch_chunks = std::max<int64_t>(1, std::min(g.batch, wanted));
  const int64_t rest = (wanted + sk.batch_chunks - 1) / sk.batch_chunks;
  sk.space_chunks = std::max<int64_t>(1, std::min(g.output[0], rest));
  return sk;
}

int64_t splitk_chunk_tiles(const ConvGeometry& g, const SplitKGemmLayout& l,
                           const SplitKGemmLimits& limits) {
  const int64_t columns = g.in_channels_per_group() * l.staged_taps;
  return g.groups * ceil_div(g.out_channels_per_group(), limits.gemm_tile) *
         ceil_div(columns, limits.gemm_tile);
}

int64_t splitk_staging_cap(int64_t units, const SplitKGemmLimits& limits) {
  return std::max(limits.staging_bytes, units * limits.staging_bytes_per_unit);
}

int64_t splitk_step_staged_elements(const ConvGeometry& g, const SplitKGemmLayout& l) {
  return l.chunks() * g.in_channels * l.staged_taps * (l.step_rows + l.halo_rows) *
         row_positions(g);
}

SplitKGemmLayout make_splitk_gemm_layout(const ConvGeometry& g, int64_t units,
                                         int64_t staged_element_bytes,
                                         int64_t partial_element_bytes,
                                         const SplitKGemmLimits& limits) {
  SplitKGemmLayout l;
  const bool taps_by_offset = g.stride[0] == 1 && g.filter[0] > 1;
  l.offset_taps = taps_by_offset ? g.filter[0] : 1;
  l.staged_taps = product(g.filter, g.spatial_dims) / l.offset_taps;
  l.halo_rows = taps_by_offset ? g.dilation[0] * (g.filter[0] - 1) : 0;

  // Chunks: at most one wave of GEMM tiles, within the partials cap, at most
  // one batch row x one output row each.
  const int64_t weight = g.out_channels * g.filter_in_channels * product(g.filter, g.spatial_dims);
  const int64_t by_memory = std::max<int64_t>(
      2, limits.partial_bytes / std::max<int64_t>(1, weight * partial_element_bytes));
  const int64_t one_wave = std::max<int64_t>(1, units) / splitk_chunk_tiles(g, l, limits);
  const int64_t wanted = std::max<int64_t>(
      1, std::min({std::clamp<int64_t>(one_wave, 2, by_memory), g.batch * g.output[0]}));
  // Row ranges of the first output dim first: their products batch into one
  // GEMM in every layout. Batch rows are split too only where the rows alone
  // fall short of the wanted count.
  const int64_t space = std::min(wanted, g.output[0]);
  l.rows_per_chunk = ceil_div(g.output[0], space);
  l.space_chunks = ceil_div(g.output[0], l.rows_per_chunk);
  l.batch_per_chunk = ceil_div(g.batch, std::max<int64_t>(1, wanted / l.space_chunks));
  l.batch_chunks = ceil_div(g.batch, l.batch_per_chunk);

  // Step rows: a step's staging (every chunk's rows plus the halo) under the cap.
  const int64_t row_bytes =
      l.chunks() * g.in_channels * l.staged_taps * row_positions(g) * staged_element_bytes;
  const int64_t rows_under_cap =
      splitk_staging_cap(units, limits) / std::max<int64_t>(1, row_bytes) - l.halo_rows;
  l.step_rows = std::clamp<int64_t>(rows_under_cap, 1, l.rows_per_chunk);
  return l;
}

}  // namespace bwdconv
