#include "ops/aten_scope.h"

#include <ATen/native/ConvUtils.h>
#include <ATen/ops/convolution_backward_native.h>
#include <ATen/ops/convolution_native.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <tuple>
#include <vector>

#include "ops/backward.h"
#include "ops/decisions.h"
#include "ops/geometry.h"

namespace bwdconv::ops {
namespace {

using Gradients = std::tuple<at::Tensor, at::Tensor, at::Tensor>;

Gradients native_convolution_backward(const at::Tensor& grad_output, const at::Tensor& input,
                                      const at::Tensor& weight,
                                      at::OptionalIntArrayRef bias_sizes, at::IntArrayRef stride,
                                      at::IntArrayRef padding, at::IntArrayRef dilation,
                                      bool transposed, at::IntArrayRef output_padding,
                                      int64_t groups, std::array<bool, 3> output_mask) {
  return at::native::convolution_backward(grad_output, input, weight, bias_sizes, stride,
                                          padding, dilation, transposed, output_padding, groups,
                                          output_mask);
}

// bwdconv plans the convolutions with 1-3 spatial dims whose arguments are
// valid (their geometry is returned); everything else, and every error
// message for bad arguments, stays aten's.
std::optional<ConvGeometry> plannable_geometry(const at::Tensor& grad_output,
                                               const at::Tensor& input, const at::Tensor& weight,
                                               const ConvParams& params) {
  if (input.dim() < 3 || input.dim() > 5) return std::nullopt;
  const size_t spatial_dims = input.dim() - 2;
  if (params.stride.size() != spatial_dims || params.padding.size() != spatial_dims ||
      params.dilation.size() != spatial_dims || input.scalar_type() != weight.scalar_type() ||
      input.device() != weight.device()) {
    return std::nullopt;
  }
  try {
    return backward_geometry("convolution_backward", grad_output, input.sizes(), weight.sizes(),
                             "weight", weight, params);
  } catch (const c10::Error&) {
    return std::nullopt;
  }
}

// The layout of a weight gradient aten's backend computes. Slow2d has no
// grouped kernel: it computes each group's gradient alone, allocated in the
// layout its slice of the weight (made dense in `format`) suggests, and
// concatenates them, so at::cat's rule sets the strides of size-1 dims (one
// input channel per group). On meta tensors: only strides are needed.
at::MemoryFormat weight_gradient_format(const at::Tensor& weight, int64_t groups,
                                        at::native::ConvBackend backend,
                                        at::MemoryFormat format) {
  if (backend != at::native::ConvBackend::Slow2d || groups == 1) return format;
  const at::Tensor group_weight =
      at::empty_strided(weight.sizes(), weight.strides(), weight.options().device(at::kMeta))
          .contiguous(format)
          .narrow(0, 0, weight.size(0) / groups);
  const at::MemoryFormat allocated = group_weight.suggest_memory_format();
  return at::empty(group_weight.sizes(), group_weight.options().memory_format(allocated))
      .suggest_memory_format();
}

// Registering for a key that already has a kernel (CUDA) makes the dispatcher
// warn about the override: that override is the point, so it stays quiet.
class IgnoreWarnings : public c10::WarningHandler {
 public:
  void process(const c10::Warning&) override {}
};

// aten::convolution: a transposed convolution's forward is planned as the
// matching convolution's input gradient; every other call is aten's own
// composite kernel, untouched.
at::Tensor planned_convolution(const at::Tensor& input, const at::Tensor& weight,
                               const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                               at::IntArrayRef padding, at::IntArrayRef dilation,
                               bool transposed, at::IntArrayRef output_padding, int64_t groups) {
  if (transposed) {
    const ConvParams params{stride, padding, dilation, groups};
    if (auto geometry =
            plannable_transposed_geometry(input, weight, bias, params, output_padding)) {
      geometry->transposed = true;
      const BackwardCall call = backward_call(input, nullptr, &weight, true, false, params);
      return compute_transposed_forward(*plan_for(*geometry, &call), input, weight, bias,
                                        output_padding);
    }
  }
  return at::native::convolution(input, weight, bias, stride, padding, dilation, transposed,
                                 output_padding, groups);
}

std::unique_ptr<torch::Library> register_for(c10::DispatchKey key) {
  IgnoreWarnings ignore;
  c10::WarningUtils::WarningHandlerGuard guard(&ignore);
  auto library =
      std::make_unique<torch::Library>(torch::Library::IMPL, "aten", key, __FILE__, __LINE__);
  library->impl("convolution", TORCH_FN(planned_convolution));
  library->impl("convolution_backward", TORCH_FN(planned_convolution_backward));
  return library;
}

struct Registrations {
  std::mutex mutex;
  std::vector<std::unique_ptr<torch::Library>> libraries;
  std::atomic<bool> enabled{false};  // read on every functional call, without the lock
};

Registrations& registrations() {
  static Registrations instance;
  return instance;
}

}  // namespace

GradientFormats aten_gradient_formats(const at::Tensor& input, const at::Tensor& weight,
                                      at::OptionalIntArrayRef bias_sizes, at::IntArrayRef stride,
                                      at::IntArrayRef padding, at::IntArrayRef dilation,
                                      int64_t groups, bool transposed,
                                      at::IntArrayRef output_padding) {
  const std::vector<int64_t> no_output_padding(stride.size(), 0);
  const at::native::ConvBackend backend = at::native::select_conv_backend(
      input, weight, std::nullopt, c10::fromIntArrayRefSlow(stride),
      c10::fromIntArrayRefSlow(padding), c10::fromIntArrayRefSlow(dilation), transposed,
      c10::fromIntArrayRefSlow(transposed ? output_padding : at::IntArrayRef(no_output_padding)),
      groups,
      bias_sizes ? std::optional<c10::SymIntArrayRef>(c10::fromIntArrayRefSlow(*bias_sizes))
                 : std::nullopt);
  const at::MemoryFormat format =
      at::native::_determine_backend_memory_format(input, weight, backend);
  return {format, weight_gradient_format(weight, groups, backend, format)};
}

namespace {

// A transposed convolution's gradients: the input gradient (a forward
// convolution) and the bias gradient are aten's; the weight gradient is the
// matching convolution's, whose grad_output is this call's input and whose
// input is this call's grad_output (docs/DESIGN.md, "Transposed convolutions").
Gradients planned_transposed_backward(const at::Tensor& grad_output, const at::Tensor& input,
                                      const at::Tensor& weight,
                                      at::OptionalIntArrayRef bias_sizes, at::IntArrayRef stride,
                                      at::IntArrayRef padding, at::IntArrayRef dilation,
                                      at::IntArrayRef output_padding, int64_t groups,
                                      std::array<bool, 3> output_mask) {
  const ConvParams params{stride, padding, dilation, groups};
  const auto native = [&](std::array<bool, 3> mask) {
    return native_convolution_backward(grad_output, input, weight, bias_sizes, stride, padding,
                                       dilation, /*transposed=*/true, output_padding, groups,
                                       mask);
  };
  const auto geometry = output_mask[1] ? plannable_transposed_geometry(
                                             input, weight, std::nullopt, params,
                                             output_padding, grad_output.sizes())
                                       : std::nullopt;
  if (!geometry) return native(output_mask);
  const BackwardCall call = backward_call(input, &grad_output, nullptr, false, true, params);
  const std::shared_ptr<const Plan> plan = plan_for(*geometry, &call);
  if (plan->weight.strategy == Strategy::aten) {
    count_served(Gradient::weight, plan->weight);
    return native(output_mask);
  }
  Gradients grads;
  if (output_mask[0] || output_mask[2]) grads = native({output_mask[0], false, output_mask[2]});
  const GradientFormats formats =
      aten_gradient_formats(input, weight, bias_sizes, stride, padding, dilation, groups,
                            /*transposed=*/true, output_padding);
  std::get<1>(grads) =
      in_layout(compute_grad_weight(*plan, input, grad_output), formats.weight);
  return grads;
}

}  // namespace

Gradients planned_convolution_backward(const at::Tensor& grad_output, const at::Tensor& input,
                                       const at::Tensor& weight,
                                       at::OptionalIntArrayRef bias_sizes,
                                       at::IntArrayRef stride, at::IntArrayRef padding,
                                       at::IntArrayRef dilation, bool transposed,
                                       at::IntArrayRef output_padding, int64_t groups,
                                       std::array<bool, 3> output_mask) {
  if (transposed) {
    return planned_transposed_backward(grad_output, input, weight, bias_sizes, stride, padding,
                                       dilation, output_padding, groups, output_mask);
  }
  const ConvParams params{stride, padding, dilation, groups};
  const auto geometry = plannable_geometry(grad_output, input, weight, params);
  if (!geometry) {
    return native_convolution_backward(grad_output, input, weight, bias_sizes, stride, padding,
                                       dilation, transposed, output_padding, groups,
                                       output_mask);
  }
  const BackwardCall call =
      backward_call(grad_output, &input, &weight, output_mask[0], output_mask[1], params);
  const std::shared_ptr<const Plan> plan = plan_for(*geometry, &call);
  // The gradients planned for aten (and the bias) come from aten's own kernel
  // with the caller's arguments, so they are aten's results stride for stride.
  const bool input_by_us = output_mask[0] && plan->input.strategy != Strategy::aten;
  const bool weight_by_us = output_mask[1] && plan->weight.strategy != Strategy::aten;
  const std::array<bool, 3> aten_mask{output_mask[0] && !input_by_us,
                                      output_mask[1] && !weight_by_us, output_mask[2]};
  Gradients grads;
  if (aten_mask[0] || aten_mask[1] || aten_mask[2]) {
    grads = native_convolution_backward(grad_output, input, weight, bias_sizes, stride, padding,
                                        dilation, transposed, output_padding, groups, aten_mask);
  }
  auto& [grad_input, grad_weight, grad_bias] = grads;
  if (input_by_us || weight_by_us) {
    // Ours are laid out as aten's backend lays out its results.
    const GradientFormats formats = aten_gradient_formats(input, weight, bias_sizes, stride,
                                                          padding, dilation, groups);
    if (input_by_us) {
      grad_input = in_layout(compute_grad_input(*plan, grad_output, weight), formats.input);
    }
    if (weight_by_us) {
      grad_weight = in_layout(compute_grad_weight(*plan, grad_output, input), formats.weight);
    }
  }
  if (aten_mask[0]) count_served(Gradient::input, plan->input);
  if (aten_mask[1]) count_served(Gradient::weight, plan->weight);
  return grads;
}

void enable_aten_scope() {
  auto& r = registrations();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (!r.libraries.empty()) return;
  r.libraries.push_back(register_for(c10::DispatchKey::CPU));
  r.libraries.push_back(register_for(c10::DispatchKey::CUDA));
  r.enabled = true;
}

void disable_aten_scope() {
  auto& r = registrations();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.libraries.clear();  // destroying a Library removes its registrations
  r.enabled = false;
}

bool aten_scope_enabled() { return registrations().enabled.load(); }

}  // namespace bwdconv::ops
