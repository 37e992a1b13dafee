#include "relayout.h"

namespace bwdconv {

std::optional<std::string> relayout_refusal(const ConvGeometry& g, const std::vector<Phase>&) {
  if (g.layout == MemoryLayout::ChannelsLast) {
    return "the gradient is channels_last already: aten computes it there as it is";
  }
  if (g.spatial_dims == 1) return "1D: a 3-D tensor has no channels_last layout";
  // PyTorch 2.11's CPU bfloat16 weight gradient in channels_last_3d comes out
  // wrong on some shapes where the NCDHW one is right (docs/limitations.md).
  if (g.device == DeviceKind::CPU && g.spatial_dims == 3 && g.dtype == DType::BFloat16) {
    return "3D bfloat16 on the CPU: oneDNN's channels_last_3d weight gradient can be wrong "
           "where its NCDHW one is right";
  }
  // PyTorch 2.11's CPU backward of a channels_last_3d convolution whose
  // padding reaches the input's size crashes or corrupts the heap on some
  // shapes, where the NCDHW one does not (docs/limitations.md).
  if (g.device == DeviceKind::CPU && g.spatial_dims == 3) {
    for (int i = 0; i < 3; ++i) {
      if (g.padding[i] >= g.input[i]) {
        return "3D on the CPU with a padding at least the input's size: PyTorch's "
               "channels_last_3d backward can crash there";
      }
    }
  }
  return std::nullopt;
}

}  // namespace bwdconv
