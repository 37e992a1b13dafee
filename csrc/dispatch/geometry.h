// Convolution geometry: the torch-free description of one convolution that
// every planner decision and kernel launch is derived from.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>

namespace bwdconv {

constexpr int kMaxSpatialDims = 3;

using SpatialSizes = std::array<int64_t, kMaxSpatialDims>;

enum class DType { Float64, Float32, Float16, BFloat16, Other };
enum class MemoryLayout { Contiguous, ChannelsLast };
enum class DeviceKind { CPU, CUDA, HIP };

const char* dtype_name(DType dtype);
int64_t dtype_bytes(DType dtype);  // 0 for Other
const char* layout_name(MemoryLayout layout);
const char* device_name(DeviceKind device);

// Sizes of a forward convolution y = conv(x, w) with
//   x: [batch, in_channels, input...], w: [out_channels, in_channels/groups, filter...],
//   y: [batch, out_channels, output...].
// The input size is explicit because it cannot be recovered from the output
// size when (input + 2p - d(K-1) - 1) is not a multiple of the stride
// (docs/DESIGN.md, "Geometry").
struct ConvGeometry {
  int spatial_dims = 0;
  int64_t batch = 0;
  int64_t in_channels = 0;
  int64_t out_channels = 0;
  int64_t filter_in_channels = 0;  // weight.size(1): in_channels / groups when valid
  int64_t groups = 1;
  SpatialSizes input{};
  SpatialSizes filter{};
  SpatialSizes output{};
  SpatialSizes stride{};
  SpatialSizes padding{};
  SpatialSizes dilation{};
  DType dtype = DType::Float32;
  MemoryLayout layout = MemoryLayout::Contiguous;
  DeviceKind device = DeviceKind::CPU;
  // The input gradient is the forward of a transposed convolution, whose input
  // is this convolution's grad_output: the same computation, but aten runs
  // other kernels for it, so its rules and decisions stand apart
  // (docs/DESIGN.md, "Transposed convolutions").
  bool transposed = false;

  int64_t in_channels_per_group() const { return in_channels / groups; }
  int64_t out_channels_per_group() const { return out_channels / groups; }
  // Extent of the dilated filter in dimension i: d(K-1) + 1.
  int64_t dilated_filter(int i) const { return dilation[i] * (filter[i] - 1) + 1; }
};

// O = floor((I + 2p - d(K-1) - 1) / s) + 1; may be <= 0 for an input smaller
// than the dilated filter, and is 0 for a non-positive stride.
int64_t conv_output_size(int64_t input, int64_t filter, int64_t stride,
                         int64_t padding, int64_t dilation);

// Sets geometry.output from the other fields.
void derive_output_sizes(ConvGeometry& geometry);

// The first problem found in the parameters, in words a user can act on, or
// nothing when the geometry describes a valid convolution. `output` must hold
// the sizes the caller has (derive_output_sizes for a forward convolution, the
// grad_output sizes for a backward one).
std::optional<std::string> find_geometry_error(const ConvGeometry& geometry);

// "[2, 3]"-style rendering of the first spatial_dims entries.
std::string format_sizes(const SpatialSizes& sizes, int spatial_dims);

// Whether the first spatial_dims entries all equal `value`.
bool all_equal_to(const SpatialSizes& sizes, int spatial_dims, int64_t value);

}  // namespace bwdconv
