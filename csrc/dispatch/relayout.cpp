#include "relayout.h"

namespace bwdconv {

std::optional<std::string> relayout_refusal(const ConvGeometry& g, const std::vector<Phase>&) {
  if (g.layout == MemoryLayout::ChannelsLast) {
    return "the gradient is channels_last already: aten computes it there as it is";
  }
  if (g.spatial_dims == 1) return "1D: a 3-D tensor has no channels_last layout";
  return std::nullopt;
}

}  // namespace bwdconv
