#include "scatter.h"

namespace bwdconv {

ScatterGeometry make_scatter_geometry(const ConvGeometry& g) {
  ScatterGeometry sg;
  sg.spatial_dims = g.spatial_dims;
  for (int i = 0; i < g.spatial_dims; ++i) {
    ScatterDim& sd = sg.dims[i];
    const int64_t span = g.dilation[i] * (g.filter[i] - 1);
    sd.lead = span - g.padding[i];
    sd.output_padding =
        g.input[i] - ((g.output[i] - 1) * g.stride[i] - 2 * g.padding[i] + span + 1);
    sd.trail = sd.lead + sd.output_padding;
    sd.buffer = (g.output[i] - 1) * g.stride[i] + 1 + sd.lead + sd.trail;
  }
  return sg;
}

}  // namespace bwdconv
