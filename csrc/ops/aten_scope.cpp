#include "ops/aten_scope.h"

#include <ATen/ops/convolution_backward_native.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

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

// bwdconv plans the non-transposed convolutions with 1-3 spatial dims whose
// arguments are valid (their geometry is returned); everything else, and
// every error message for bad arguments, stays aten's.
std::optional<ConvGeometry> plannable_geometry(const at::Tensor& grad_output,
                                               const at::Tensor& input, const at::Tensor& weight,
                                               const ConvParams& params, bool transposed) {
  if (transposed || input.dim() < 3 || input.dim() > 5) return std::nullopt;
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

Gradients planned_convolution_backward(const at::Tensor& grad_output, const at::Tensor& input,
                                       const at::Tensor& weight,
                                       at::OptionalIntArrayRef bias_sizes,
                                       at::IntArrayRef stride, at::IntArrayRef padding,
                                       at::IntArrayRef dilation, bool transposed,
                                       at::IntArrayRef output_padding, int64_t groups,
                                       std::array<bool, 3> output_mask) {
  const ConvParams params{stride, padding, dilation, groups};
  const auto geometry = plannable_geometry(grad_output, input, weight, params, transposed);
  if (!geometry) {
    return native_convolution_backward(grad_output, input, weight, bias_sizes, stride, padding,
                                       dilation, transposed, output_padding, groups,
                                       output_mask);
  }
  const BackwardCall call =
      backward_call(grad_output, &input, &weight, output_mask[0], output_mask[1], params);
  const std::shared_ptr<const Plan> plan = plan_for(*geometry, &call);
  at::Tensor grad_input, grad_weight, grad_bias;
  if (output_mask[0] && output_mask[1]) {
    std::tie(grad_input, grad_weight) = compute_grads(*plan, grad_output, input, weight);
  } else if (output_mask[0]) {
    grad_input = compute_grad_input(*plan, grad_output, weight);
  } else if (output_mask[1]) {
    grad_weight = compute_grad_weight(*plan, grad_output, input);
  }
  if (output_mask[2]) grad_bias = compute_grad_bias(grad_output);
  return {grad_input, grad_weight, grad_bias};
}

// Registering for a key that already has a kernel (CUDA) makes the dispatcher
// warn about the override: that override is the point, so it stays quiet.
class IgnoreWarnings : public c10::WarningHandler {
 public:
  void process(const c10::Warning&) override {}
};

std::unique_ptr<torch::Library> register_for(c10::DispatchKey key) {
  IgnoreWarnings ignore;
  c10::WarningUtils::WarningHandlerGuard guard(&ignore);
  auto library =
      std::make_unique<torch::Library>(torch::Library::IMPL, "aten", key, __FILE__, __LINE__);
  library->impl("convolution_backward", TORCH_FN(planned_convolution_backward));
  return library;
}

struct Registrations {
  std::mutex mutex;
  std::vector<std::unique_ptr<torch::Library>> libraries;
};

Registrations& registrations() {
  static Registrations instance;
  return instance;
}

}  // namespace

void enable_aten_scope() {
  auto& r = registrations();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (!r.libraries.empty()) return;
  r.libraries.push_back(register_for(c10::DispatchKey::CPU));
  r.libraries.push_back(register_for(c10::DispatchKey::CUDA));
}

void disable_aten_scope() {
  auto& r = registrations();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.libraries.clear();  // destroying a Library removes its registrations
}

bool aten_scope_enabled() {
  auto& r = registrations();
  std::lock_guard<std::mutex> lock(r.mutex);
  return !r.libraries.empty();
}

}  // namespace bwdconv::ops
