#include "ops/precompiled.h"  // first, as the precompiled header must be

#include "ops/geometry.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

namespace bwdconv::ops {
namespace {

DType to_dtype(at::ScalarType type) {
  switch (type) {
    case at::kDouble: return DType::Float64;
    case at::kFloat: return DType::Float32;
    case at::kHalf: return DType::Float16;
    case at::kBFloat16: return DType::BFloat16;
    default: return DType::Other;
  }
}

DeviceKind to_device(const at::Tensor& t) {
  if (!t.is_cuda()) return DeviceKind::CPU;
#if defined(USE_ROCM)
  return DeviceKind::HIP;  // ROCm tensors use the CUDA device type
#else
  return DeviceKind::CUDA;
#endif
}

MemoryLayout to_layout(const at::Tensor& t) {
  const auto format = t.suggest_memory_format();
  return format == at::MemoryFormat::Contiguous ? MemoryLayout::Contiguous
                                                 : MemoryLayout::ChannelsLast;
}

void check_rank(const char* op, const char* name, const at::Tensor& t) {
  TORCH_CHECK(t.dim() >= 3 && t.dim() <= 5, op, ": expected ", name,
              " to be a 3-D, 4-D or 5-D tensor (batch, channels and 1-3 spatial dims), but got ",
              name, " of size ", t.sizes());
}

void check_same_rank(const char* op, const char* name, int64_t rank, at::IntArrayRef sizes) {
  TORCH_CHECK(static_cast<int64_t>(sizes.size()) == rank, op, ": expected ", name, " to be ",
              rank, "-D like the other operand, but got ", name, " of size ", sizes);
}

void check_floating(const char* op, const char* name, const at::Tensor& t) {
  TORCH_CHECK(to_dtype(t.scalar_type()) != DType::Other, op,
              ": expected a float64, float32, float16 or bfloat16 ", name, ", but got ", name,
              " of dtype ", t.dtype());
}

void check_matches(const char* op, const char* name, const at::Tensor& t, const char* other_name,
                   const at::Tensor& other) {
  TORCH_CHECK(t.scalar_type() == other.scalar_type(), op, ": ", name, " type (", t.dtype(),
              ") and ", other_name, " type (", other.dtype(), ") should be the same");
  TORCH_CHECK(t.device() == other.device(), op, ": expected ", name, " and ", other_name,
              " on the same device, but got ", name, " on ", t.device(), " and ", other_name,
              " on ", other.device());
}

void check_param_lengths(const char* op, const ConvParams& p, int spatial_dims) {
  const std::pair<const char*, at::IntArrayRef> lists[] = {
      {"stride", p.stride}, {"padding", p.padding}, {"dilation", p.dilation}};
  for (const auto& [name, values] : lists) {
    TORCH_CHECK(static_cast<int>(values.size()) == spatial_dims, op, ": expected ", name,
                " to have ", spatial_dims, " values (one per spatial dim), but got ", name, "=",
                values);
  }
}

ConvGeometry describe_operand(ConvGeometry g, const at::Tensor& operand) {
  g.dtype = to_dtype(operand.scalar_type());
  g.layout = to_layout(operand);
  g.device = to_device(operand);
  return g;
}

void check_geometry(const char* op, const ConvGeometry& g) {
  const auto error = find_geometry_error(g);
  TORCH_CHECK(!error, op, ": ", error.value_or(""));
}

}  // namespace

ConvGeometry sizes_geometry(at::IntArrayRef input_sizes, at::IntArrayRef weight_sizes,
                            const ConvParams& p) {
  ConvGeometry g;
  g.spatial_dims = static_cast<int>(input_sizes.size()) - 2;
  g.batch = input_sizes[0];
  g.in_channels = input_sizes[1];
  g.out_channels = weight_sizes[0];
  g.filter_in_channels = weight_sizes[1];
  g.groups = p.groups;
  for (int i = 0; i < g.spatial_dims; ++i) {
    g.input[i] = input_sizes[i + 2];
    g.filter[i] = weight_sizes[i + 2];
    g.stride[i] = p.stride[i];
    g.padding[i] = p.padding[i];
    g.dilation[i] = p.dilation[i];
  }
  return g;
}

ConvParams geometry_params(const ConvGeometry& g) {
  const auto spatial = [&](const SpatialSizes& sizes) {
    return at::IntArrayRef(sizes.data(), g.spatial_dims);
  };
  return {spatial(g.stride), spatial(g.padding), spatial(g.dilation), g.groups};
}

std::vector<int64_t> input_sizes(const ConvGeometry& g) {
  std::vector<int64_t> sizes{g.batch, g.in_channels};
  sizes.insert(sizes.end(), g.input.begin(), g.input.begin() + g.spatial_dims);
  return sizes;
}

std::vector<int64_t> weight_sizes(const ConvGeometry& g) {
  std::vector<int64_t> sizes{g.out_channels, g.filter_in_channels};
  sizes.insert(sizes.end(), g.filter.begin(), g.filter.begin() + g.spatial_dims);
  return sizes;
}

ConvGeometry forward_geometry(const char* op, const at::Tensor& input, const at::Tensor& weight,
                              const std::optional<at::Tensor>& bias, const ConvParams& params) {
  check_rank(op, "input", input);
  check_same_rank(op, "weight", input.dim(), weight.sizes());
  check_floating(op, "input", input);
  check_matches(op, "input", input, "weight", weight);
  if (bias && bias->defined()) {
    check_matches(op, "bias", *bias, "weight", weight);
    TORCH_CHECK(bias->dim() == 1 && bias->size(0) == weight.size(0), op,
                ": expected bias of size [", weight.size(0),
                "] (one value per output channel), but got bias of size ", bias->sizes());
  }
  check_param_lengths(op, params, static_cast<int>(input.dim()) - 2);
  ConvGeometry g = describe_operand(sizes_geometry(input.sizes(), weight.sizes(), params), input);
  derive_output_sizes(g);
  check_geometry(op, g);
  return g;
}

std::optional<ConvGeometry> forward_call_geometry(const at::Tensor& input,
                                                  const at::Tensor& weight,
                                                  const std::optional<at::Tensor>& bias,
                                                  const ConvParams& params, int spatial_dims) {
  const int64_t rank = spatial_dims + 2;
  const bool unbatched = input.dim() == rank - 1;
  if ((input.dim() != rank && !unbatched) || weight.dim() != rank ||
      static_cast<int64_t>(params.stride.size()) != spatial_dims ||
      static_cast<int64_t>(params.padding.size()) != spatial_dims ||
      static_cast<int64_t>(params.dilation.size()) != spatial_dims ||
      to_dtype(input.scalar_type()) == DType::Other ||
      input.scalar_type() != weight.scalar_type() || input.device() != weight.device()) {
    return std::nullopt;
  }
  if (bias && (bias->dim() != 1 || bias->size(0) != weight.size(0) ||
               bias->scalar_type() != weight.scalar_type() || bias->device() != weight.device())) {
    return std::nullopt;
  }
  std::vector<int64_t> sizes = input.sizes().vec();
  if (unbatched) sizes.insert(sizes.begin(), 1);
  ConvGeometry g = sizes_geometry(sizes, weight.sizes(), params);
  g.dtype = to_dtype(input.scalar_type());
  g.device = to_device(input);
  g.layout = gradient_memory_format(input, weight) == at::MemoryFormat::Contiguous
                 ? MemoryLayout::Contiguous
                 : MemoryLayout::ChannelsLast;
  derive_output_sizes(g);
  if (find_geometry_error(g)) return std::nullopt;
  return g;
}

ConvGeometry backward_geometry(const char* op, const at::Tensor& grad_output,
                               at::IntArrayRef input_sizes, at::IntArrayRef weight_sizes,
                               const char* operand_name, const at::Tensor& operand,
                               const ConvParams& params) {
  check_rank(op, "grad_output", grad_output);
  check_same_rank(op, "input_size", grad_output.dim(), input_sizes);
  check_same_rank(op, "weight_size", grad_output.dim(), weight_sizes);
  check_floating(op, "grad_output", grad_output);
  check_matches(op, "grad_output", grad_output, operand_name, operand);
  check_param_lengths(op, params, static_cast<int>(grad_output.dim()) - 2);
  ConvGeometry g =
      describe_operand(sizes_geometry(input_sizes, weight_sizes, params), grad_output);
  for (int i = 0; i < g.spatial_dims; ++i) g.output[i] = grad_output.size(i + 2);
  TORCH_CHECK(grad_output.size(0) == g.batch && grad_output.size(1) == g.out_channels, op,
              ": expected grad_output of size [", g.batch, ", ", g.out_channels,
              ", ...] (batch of the input, output channels of the weight), but got ",
              grad_output.sizes());
  check_geometry(op, g);
  return g;
}

namespace {

std::vector<int64_t> transposed_output_sizes(at::IntArrayRef input_sizes,
                                             at::IntArrayRef weight_sizes,
                                             const ConvParams& p,
                                             at::IntArrayRef output_padding) {
  std::vector<int64_t> sizes{input_sizes[0], weight_sizes[1] * p.groups};
  for (size_t i = 0; i + 2 < input_sizes.size(); ++i) {
    sizes.push_back((input_sizes[i + 2] - 1) * p.stride[i] - 2 * p.padding[i] +
                    p.dilation[i] * (weight_sizes[i + 2] - 1) + output_padding[i] + 1);
  }
  return sizes;
}

}  // namespace

ConvGeometry transposed_geometry(const char* op, const at::Tensor& input,
                                 const at::Tensor& weight,
                                 const std::optional<at::Tensor>& bias,
                                 const ConvParams& params, at::IntArrayRef output_padding) {
  check_rank(op, "input", input);
  check_same_rank(op, "weight", input.dim(), weight.sizes());
  check_param_lengths(op, params, static_cast<int>(input.dim()) - 2);
  TORCH_CHECK(output_padding.size() == params.stride.size(), op,
              ": expected one output_padding value per spatial dim, but got output_padding=",
              output_padding);
  for (size_t i = 0; i < output_padding.size(); ++i) {
    TORCH_CHECK(output_padding[i] >= 0 && output_padding[i] < params.stride[i], op,
                ": expected output_padding smaller than the stride, but got output_padding=",
                output_padding, " and stride=", params.stride);
  }
  if (bias && bias->defined()) {
    check_matches(op, "bias", *bias, "weight", weight);
    TORCH_CHECK(bias->dim() == 1 && bias->size(0) == weight.size(1) * params.groups, op,
                ": expected bias of size [", weight.size(1) * params.groups,
                "] (one value per output channel), but got bias of size ", bias->sizes());
  }
  const std::vector<int64_t> output_sizes =
      transposed_output_sizes(input.sizes(), weight.sizes(), params, output_padding);
  return backward_geometry(op, input, output_sizes, weight.sizes(), "weight", weight, params);
}

std::optional<ConvGeometry> plannable_transposed_geometry(const at::Tensor& input,
                                                          const at::Tensor& weight,
                                                          const std::optional<at::Tensor>& bias,
                                                          const ConvParams& params,
                                                          at::IntArrayRef output_padding,
                                                          at::OptionalIntArrayRef output_sizes) {
  if (input.scalar_type() != weight.scalar_type() || input.device() != weight.device()) {
    return std::nullopt;
  }
  try {
    ConvGeometry geometry =
        transposed_geometry("conv_transpose", input, weight, bias, params, output_padding);
    if (output_sizes && at::IntArrayRef(input_sizes(geometry)) != *output_sizes) {
      return std::nullopt;
    }
    // An empty output is aten's to make (and a negative one aten's to refuse).
    for (int i = 0; i < geometry.spatial_dims; ++i) {
      if (geometry.input[i] <= 0) return std::nullopt;
    }
    return geometry;
  } catch (const c10::Error&) {
    return std::nullopt;
  }
}

namespace {

// The first layout other than contiguous that a or b suggests; with
// `dense_is_contiguous`, an operand dense in the default layout suggests
// contiguous.
at::MemoryFormat first_suggested_layout(const at::Tensor& a, const at::Tensor& b,
                                        bool dense_is_contiguous) {
  for (const at::Tensor* t : {&a, &b}) {
    if (dense_is_contiguous && t->is_contiguous()) continue;
    const auto format = t->suggest_memory_format();
    if (format != at::MemoryFormat::Contiguous) return format;
  }
  return at::MemoryFormat::Contiguous;
}

}  // namespace

at::MemoryFormat gradient_memory_format(const at::Tensor& a, const at::Tensor& b) {
  return first_suggested_layout(a, b, /*dense_is_contiguous=*/false);
}

at::MemoryFormat op_gradient_memory_format(const at::Tensor& a, const at::Tensor& b) {
  return first_suggested_layout(a, b, /*dense_is_contiguous=*/true);
}

std::vector<int64_t> fresh_strides(at::IntArrayRef sizes, at::MemoryFormat format) {
  if (format == at::MemoryFormat::ChannelsLast) return c10::get_channels_last_strides_2d(sizes);
  if (format == at::MemoryFormat::ChannelsLast3d) return c10::get_channels_last_strides_3d(sizes);
  std::vector<int64_t> strides(sizes.size());
  int64_t stride = 1;
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    strides[d] = stride;
    stride *= std::max<int64_t>(sizes[d], 1);
  }
  return strides;
}

at::Tensor in_layout(const at::Tensor& t, at::MemoryFormat format) {
  const std::vector<int64_t> strides = fresh_strides(t.sizes(), format);
  if (t.strides() == at::IntArrayRef(strides)) return t;
  // Dense in `format` already: only strides of size-1 dims differ, same memory.
  if (t.is_contiguous(format)) return t.as_strided(t.sizes(), strides);
  return at::empty_strided(t.sizes(), strides, t.options()).copy_(t);
}

namespace {

// The layout `t` is dense in, contiguous first (a tensor dense in both has a
// size-1 dim that leaves the choice free); nothing where it has no size-1
// dim, as a tensor dense in a layout then has that layout's strides already.
std::optional<at::MemoryFormat> dense_layout(const at::Tensor& t) {
  const at::IntArrayRef sizes = t.sizes();
  if (std::find(sizes.begin(), sizes.end(), 1) == sizes.end()) return std::nullopt;
  if (t.is_contiguous()) return at::MemoryFormat::Contiguous;
  if (t.dim() == 4 && t.is_contiguous(at::MemoryFormat::ChannelsLast)) {
    return at::MemoryFormat::ChannelsLast;
  }
  if (t.dim() == 5 && t.is_contiguous(at::MemoryFormat::ChannelsLast3d)) {
    return at::MemoryFormat::ChannelsLast3d;
  }
  return std::nullopt;
}

}  // namespace

at::Tensor settled(const at::Tensor& t) {
  const auto layout = dense_layout(t);
  return layout ? in_layout(t, *layout) : t;
}

bool settling_restrides(const at::Tensor& t) {
  const auto layout = dense_layout(t);
  return layout && t.strides() != at::IntArrayRef(fresh_strides(t.sizes(), *layout));
}

}  // namespace bwdconv::ops
