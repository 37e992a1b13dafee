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

}  // namespace bwdconv
