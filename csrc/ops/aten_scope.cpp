#include "ops/precompiled.h"  // first, as the precompiled header must be

#include "ops/aten_scope.h"

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
#include "ops/geometry.h"
#include "ops/plans.h"

namespace bwdconv::ops {
namespace {

// Registering for a key that already has a kernel (CUDA) makes the dispatcher
// warn about the override: that override is the point, so it stays quiet.
class IgnoreWarnings : public c10::WarningHandler {
 public:
  void process(const c10::Warning&) override {}
};

// Every field of a transposed aten::convolution call that its validity and
// plan depend on.
CallKey transposed_forward_key(const at::Tensor& input, const at::Tensor& weight,
                               const std::optional<at::Tensor>& bias, const ConvParams& params,
                               at::IntArrayRef output_padding) {
  CallKey key;
  key.add(static_cast<int64_t>(KeyTag::aten_transposed_forward));
  // Whether autograd records the call (transposed_forward_call).
  key.add(int64_t{at::GradMode::is_enabled()} | int64_t{input.requires_grad()} << 1 |
          int64_t{weight.requires_grad()} << 2);
  key.add_operand(input);
  key.add_operand(weight);
  const bool has_bias = bias && bias->defined();
  key.add(has_bias);
  if (has_bias) key.add_operand(*bias);
  key.add_arguments(params, output_padding);
  return key;
}

// The plan of a transposed convolution's forward, as the matching
// convolution's input gradient (nullptr: bwdconv does not plan it).
PlanLookup transposed_forward_plan(const at::Tensor& input, const at::Tensor& weight,
                                   const std::optional<at::Tensor>& bias,
                                   const ConvParams& params, at::IntArrayRef output_padding) {
  auto geometry = plannable_transposed_geometry(input, weight, bias, params, output_padding);
  if (!geometry) return {};
  geometry->transposed = true;
  const BackwardCall call = transposed_forward_call(input, weight, params);
  return resolve_plan(*geometry, &call);
}

// aten::convolution: a transposed convolution's forward is planned; every
// other call, and every call the autotuner makes (its baselines are aten's
// own), is aten's own composite kernel, untouched.
at::Tensor planned_convolution(const at::Tensor& input, const at::Tensor& weight,
                               const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                               at::IntArrayRef padding, at::IntArrayRef dilation,
                               bool transposed, at::IntArrayRef output_padding, int64_t groups) {
  if (transposed && !tuning_on_this_thread()) {
    const ConvParams params{stride, padding, dilation, groups};
    const CachedPlan cached(transposed_forward_key(input, weight, bias, params, output_padding));
    const PlanSummary& known = cached.summary();
    std::shared_ptr<const Plan> plan;
    if (!cached.found()) {
      PlanLookup lookup = transposed_forward_plan(input, weight, bias, params, output_padding);
      if (!lookup.pending) cached.keep(lookup.plan);
      plan = std::move(lookup.plan);
    } else if (known.planned && known.input == Strategy::aten) {
      count_served(Served::forward, Strategy::aten, known.input_measured);
    } else if (known.planned) {
      plan = cached.plan();
    }
    if (plan) return compute_transposed_forward(*plan, input, weight, bias, output_padding);
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
