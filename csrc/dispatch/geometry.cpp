#include "geometry.h"

#include <sstream>

namespace bwdconv {

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::Float64: return "float64";
    case DType::Float32: return "float32";
    case DType::Float16: return "float16";
    case DType::BFloat16: return "bfloat16";
    case DType::Other: break;
  }
  return "other";
}

int64_t dtype_bytes(DType dtype) {
  switch (dtype) {
    case DType::Float64: return 8;
    case DType::Float32: return 4;
    case DType::Float16:
    case DType::BFloat16: return 2;
    case DType::Other: break;
  }
  return 0;
}

const char* layout_name(MemoryLayout layout) {
  return layout == MemoryLayout::ChannelsLast ? "channels_last" : "contiguous";
}

const char* device_name(DeviceKind device) {
  switch (device) {
    case DeviceKind::CPU: return "cpu";
    case DeviceKind::CUDA: return "cuda";
    case DeviceKind::HIP: return "hip";
  }
  return "unknown";
}

int64_t conv_output_size(int64_t input, int64_t filter, int64_t stride,
                         int64_t padding, int64_t dilation) {
  if (stride <= 0) return 0;  // rejected by find_geometry_error; never divide by it
  const int64_t span = input + 2 * padding - dilation * (filter - 1) - 1;
  // Floor division that stays correct for a negative span.
  const int64_t floor_div = span >= 0 ? span / stride : -((-span + stride - 1) / stride);
  return floor_div + 1;
}

void derive_output_sizes(ConvGeometry& geometry) {
  for (int i = 0; i < geometry.spatial_dims; ++i) {
    geometry.output[i] =
        conv_output_size(geometry.input[i], geometry.filter[i], geometry.stride[i],
                         geometry.padding[i], geometry.dilation[i]);
  }
}

std::string format_sizes(const SpatialSizes& sizes, int spatial_dims) {
  std::ostringstream out;
  out << "[";
  for (int i = 0; i < spatial_dims; ++i) out << (i ? ", " : "") << sizes[i];
  out << "]";
  return out.str();
}

bool all_equal_to(const SpatialSizes& sizes, int spatial_dims, int64_t value) {
  for (int i = 0; i < spatial_dims; ++i) {
    if (sizes[i] != value) return false;
  }
  return true;
}

namespace {

std::optional<std::string> find_parameter_error(const ConvGeometry& g) {
  const int n = g.spatial_dims;
  for (int i = 0; i < n; ++i) {
    if (g.stride[i] <= 0) {
      return "non-positive stride is not supported: stride=" + format_sizes(g.stride, n);
    }
    if (g.padding[i] < 0) {
      return "negative padding is not supported: padding=" + format_sizes(g.padding, n);
    }
    if (g.dilation[i] <= 0) {
      return "dilation should be greater than zero: dilation=" + format_sizes(g.dilation, n);
    }
  }
  return std::nullopt;
}

bool channels_consistent(const ConvGeometry& g) {
  return g.groups > 0 && g.out_channels > 0 && g.in_channels % g.groups == 0 &&
         g.out_channels % g.groups == 0 && g.filter_in_channels * g.groups == g.in_channels;
}

// The message is built only for an inconsistent geometry: the planner checks
// every new shape.
std::optional<std::string> find_channel_error(const ConvGeometry& g) {
  if (channels_consistent(g)) return std::nullopt;
  std::ostringstream out;
  if (g.groups <= 0) {
    out << "non-positive groups is not supported: groups=" << g.groups;
  } else if (g.out_channels <= 0) {
    out << "weight should have at least one output channel, got out_channels=" << g.out_channels;
  } else if (g.in_channels % g.groups != 0) {
    out << "groups=" << g.groups << " does not divide the " << g.in_channels
        << " input channels";
  } else if (g.out_channels % g.groups != 0) {
    out << "groups=" << g.groups << " does not divide the " << g.out_channels
        << " output channels of the weight";
  } else {
    out << "weight with " << g.filter_in_channels << " input channels per group and groups="
        << g.groups << " expects an input with " << g.filter_in_channels * g.groups
        << " channels, but the input has " << g.in_channels << " channels";
  }
  return out.str();
}

std::optional<std::string> find_size_error(const ConvGeometry& g) {
  const int n = g.spatial_dims;
  for (int i = 0; i < n; ++i) {
    if (g.filter[i] <= 0) {
      return "weight has a non-positive spatial size: " + format_sizes(g.filter, n);
    }
    if (g.input[i] < 0) {
      return "input has a negative spatial size: " + format_sizes(g.input, n);
    }
    const int64_t padded = g.input[i] + 2 * g.padding[i];
    if (padded < g.dilated_filter(i)) {
      std::ostringstream out;
      SpatialSizes padded_input{}, dilated_filter{};
      for (int j = 0; j < n; ++j) {
        padded_input[j] = g.input[j] + 2 * g.padding[j];
        dilated_filter[j] = g.dilated_filter(j);
      }
      out << "input size per channel after padding " << format_sizes(padded_input, n)
          << " is smaller than the dilated kernel size " << format_sizes(dilated_filter, n)
          << ": the kernel size can't be greater than the padded input size";
      return out.str();
    }
  }
  return std::nullopt;
}

std::optional<std::string> find_output_error(const ConvGeometry& g) {
  const int n = g.spatial_dims;
  SpatialSizes expected{};
  for (int i = 0; i < n; ++i) {
    expected[i] = conv_output_size(g.input[i], g.filter[i], g.stride[i], g.padding[i],
                                   g.dilation[i]);
  }
  bool matches = true;
  for (int i = 0; i < n; ++i) matches = matches && expected[i] == g.output[i];
  if (matches) return std::nullopt;
  return "grad_output has spatial size " + format_sizes(g.output, n) +
         " but a convolution of an input of size " + format_sizes(g.input, n) +
         " produces " + format_sizes(expected, n);
}

}  // namespace

std::optional<std::string> find_geometry_error(const ConvGeometry& g) {
  if (g.spatial_dims < 1 || g.spatial_dims > kMaxSpatialDims) {
    return "expected 1, 2 or 3 spatial dimensions, got " + std::to_string(g.spatial_dims);
  }
  if (auto error = find_parameter_error(g)) return error;
  if (auto error = find_channel_error(g)) return error;
  if (auto error = find_size_error(g)) return error;
  if (auto error = find_output_error(g)) return error;
  return std::nullopt;
}

}  // namespace bwdconv
