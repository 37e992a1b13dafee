#include "ops/precompiled.h"  // first, as the precompiled header must be

#include "ops/strategies.h"

#include <ATen/ops/convolution_native.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <vector>

#include "ops/aten.h"
#include "ops/backward.h"
#include "ops/phase.h"
#include "ops/phase_stacked.h"
#include "ops/relayout.h"
#include "ops/scatter.h"
#include "ops/splitk.h"
#include "ops/swap1x1.h"

namespace bwdconv::ops {
namespace {

struct Implementation {
  Strategy strategy;
  GradientFn input;   // nullptr: the strategy does not compute it
  GradientFn weight;
};

// What implementation() returns: kImplementations' functions, or a test's
// stand-ins (replace_implementation).
using Table = std::array<std::array<std::atomic<GradientFn>, 2>, kStrategyCount>;

// Indexed by Strategy, like kStrategies.
constexpr std::array<Implementation, kStrategyCount> kImplementations{{
    {Strategy::aten, aten_grad_input, aten_grad_weight},
    {Strategy::swap1x1, swap1x1_grad_input, nullptr},
    {Strategy::scatter, scatter_grad_input, nullptr},
    {Strategy::phase, phase_grad_input, nullptr},
    {Strategy::phase_stacked, phase_stacked_grad_input, nullptr},
    {Strategy::splitk, nullptr, splitk_grad_weight},
    {Strategy::relayout, relayout_grad_input, relayout_grad_weight},
}};

// Every registered strategy has exactly the implementations its entry says it computes.
constexpr bool implements_the_registry() {
  for (size_t i = 0; i < kStrategyCount; ++i) {
    const Implementation& impl = kImplementations[i];
    if (impl.strategy != kStrategies[i].strategy) return false;
    if ((impl.input != nullptr) != kStrategies[i].computes_input) return false;
    if ((impl.weight != nullptr) != kStrategies[i].computes_weight) return false;
  }
  return true;
}
static_assert(implements_the_registry(),
              "kImplementations must follow kStrategies: one function per gradient computed");

Table& table() {
  static Table* instance = [] {
    auto* t = new Table();
    for (size_t i = 0; i < kStrategyCount; ++i) {
      (*t)[i][0] = kImplementations[i].input;
      (*t)[i][1] = kImplementations[i].weight;
    }
    return t;
  }();
  return *instance;
}

std::atomic<GradientFn>& entry(Strategy strategy, Gradient gradient) {
  return table()[static_cast<size_t>(strategy)][gradient == Gradient::input ? 0 : 1];
}

}  // namespace

GradientFn implementation(Strategy strategy, Gradient gradient) {
  return entry(strategy, gradient).load(std::memory_order_relaxed);
}

GradientFn replace_implementation(Strategy strategy, Gradient gradient, GradientFn fn) {
  return entry(strategy, gradient).exchange(fn);
}


namespace {

using Counts = std::array<std::array<std::atomic<int64_t>, kStrategyCount>, 3>;
Counts served{};
Counts served_measured{};  // the part of `served` that a measured decision chose

std::atomic<int64_t>& counter(Counts& counts, Served served, Strategy strategy) {
  return counts[static_cast<size_t>(served)][static_cast<size_t>(strategy)];
}

}  // namespace

const char* served_name(Served what) {
  switch (what) {
    case Served::input: return "input";
    case Served::weight: return "weight";
    case Served::forward: return "forward";
  }
  return "?";
}

// The tuner's own runs are not counted.
void count_served(Served what, Strategy strategy, bool measured) {
  if (tuning_on_this_thread()) return;
  counter(served, what, strategy)++;
  if (measured) counter(served_measured, what, strategy)++;
}

void count_served(Served what, const GradientPlan& plan) {
  count_served(what, plan.strategy, plan.measured);
}

int64_t served_count(Served what, Strategy strategy, bool measured_only) {
  return counter(measured_only ? served_measured : served, what, strategy).load();
}

void reset_served_counts() {
  for (Counts* counts : {&served, &served_measured}) {
    for (auto& per_gradient : *counts) {
      for (auto& count : per_gradient) count.store(0);
    }
  }
}

at::Tensor compute_grad_bias(const at::Tensor& grad_output) {
  std::vector<int64_t> dims{0};
  for (int64_t d = 2; d < grad_output.dim(); ++d) dims.push_back(d);
  return grad_output.sum(dims);
}

namespace {

// `gradient` as aten computes it. `counterpart`, where the call has it, is its
// other operand (the input for the input gradient, the weight for the weight
// gradient): aten then gets the call's real operands. Without it the aten
// strategy gives aten a stand-in of that operand, on a GPU an allocation of
// its size (docs/DESIGN.md, "aten").
at::Tensor by_aten(Gradient gradient, const Plan& plan, const at::Tensor& grad_output,
                   const at::Tensor& operand, const at::Tensor* counterpart,
                   at::MemoryFormat format) {
  if (counterpart == nullptr) {
    return implementation(Strategy::aten, gradient)(plan, grad_output, operand, format);
  }
  const bool want_input = gradient == Gradient::input;
  return aten_gradient(grad_output, want_input ? *counterpart : operand,
                       want_input ? operand : *counterpart, geometry_params(plan.geometry),
                       want_input);
}

// "conv2d input [N, C, H, W] filter [3, 3] stride [2, 2] (float32, ...)"; a
// transposed convolution's input is its matching convolution's grad_output.
std::string shape_text(const ConvGeometry& g) {
  const int64_t channels = g.transposed ? g.out_channels : g.in_channels;
  const SpatialSizes& sizes = g.transposed ? g.output : g.input;
  return std::string(g.transposed ? "conv_transpose" : "conv") + std::to_string(g.spatial_dims) +
         "d input [" + std::to_string(g.batch) + ", " + std::to_string(channels) + ", " +
         format_sizes(sizes, g.spatial_dims).substr(1) + " filter " +
         format_sizes(g.filter, g.spatial_dims) + " stride " +
         format_sizes(g.stride, g.spatial_dims) + " (" + dtype_name(g.dtype) + ", " +
         layout_name(g.layout) + ", " + device_name(g.device) + ")";
}

// `run()`, the gradient the plan's strategy computes; when it raises
// c10::OutOfMemoryError (a GPU's caching allocator or the CPU allocator),
// what it allocated is released as the error unwinds, one warning names the
// strategy and the shape, the shape's plans leave the gradient to aten from
// then on, and `aten()` computes it (docs/DESIGN.md, "Out of memory"). aten's
// own out-of-memory error, and every other error, reaches the caller unchanged.
at::Tensor aten_if_out_of_memory(Gradient gradient, const Plan& plan,
                                 const std::function<at::Tensor()>& run,
                                 const std::function<at::Tensor()>& aten) {
  const Strategy strategy = plan.of(gradient).strategy;
  try {
    return run();
  } catch (const c10::OutOfMemoryError& error) {
    record_out_of_memory(plan, gradient);
    TORCH_WARN("bwdconv: ", strategy_name(strategy), " ran out of memory computing the ",
               gradient_name(gradient), " gradient of ", shape_text(plan.geometry),
               "; aten computes it, and every later one of this shape in this process (",
               error.what_without_backtrace(), ")");
  }
  return aten();
}

// The planned strategy's `gradient`; aten's where the strategy runs out of
// memory.
at::Tensor compute(Gradient gradient, const Plan& plan, const at::Tensor& grad_output,
                   const at::Tensor& operand, const at::Tensor* counterpart,
                   at::MemoryFormat format, Served counted_as) {
  const Strategy strategy = plan.of(gradient).strategy;
  const GradientFn fn = implementation(strategy, gradient);
  TORCH_INTERNAL_ASSERT(fn != nullptr, strategy_name(strategy), " planned for the ",
                        gradient_name(gradient), " gradient");
  const auto aten = [&] {
    return by_aten(gradient, plan, grad_output, operand, counterpart, format);
  };
  at::Tensor result;
  if (strategy == Strategy::aten) {
    result = aten();
    count_served(counted_as, plan.of(gradient));
  } else {
    bool fell_back = false;
    result = aten_if_out_of_memory(
        gradient, plan, [&] { return fn(plan, grad_output, operand, format); },
        [&] {
          fell_back = true;
          return aten();
        });
    count_served(counted_as, fell_back ? GradientPlan{} : plan.of(gradient));
  }
  return in_layout(result, format);
}

}  // namespace

at::Tensor compute_grad_input(const Plan& plan, const at::Tensor& grad_output,
                              const at::Tensor& weight) {
  return compute(Gradient::input, plan, grad_output, weight, nullptr,
                 op_gradient_memory_format(grad_output, weight), Served::input);
}

at::Tensor compute_grad_weight(const Plan& plan, const at::Tensor& grad_output,
                               const at::Tensor& input) {
  return compute(Gradient::weight, plan, grad_output, input, nullptr,
                 op_gradient_memory_format(input, grad_output), Served::weight);
}

at::Tensor compute_transposed_forward(const Plan& plan, const at::Tensor& input,
                                      const at::Tensor& weight,
                                      const std::optional<at::Tensor>& bias,
                                      at::IntArrayRef output_padding) {
  if (plan.input.strategy == Strategy::aten) {
    count_served(Served::forward, plan.input);
    const ConvParams p = geometry_params(plan.geometry);
    // aten's composite itself: the aten scope's kernel for aten::convolution
    // would plan this call again.
    return at::native::convolution(input, weight, bias, p.stride, p.padding, p.dilation,
                                   /*transposed=*/true, output_padding, p.groups);
  }
  // Laid out by PyTorch's meta rule, then as aten's backend lays it out (as
  // aten.convolution's fake, which bwdconv's fake is, lays it out too).
  at::Tensor output = compute(Gradient::input, plan, input, weight, nullptr,
                              gradient_memory_format(input, weight), Served::forward);
  if (bias && bias->defined()) {
    std::vector<int64_t> per_channel(output.dim(), 1);
    per_channel[1] = -1;
    output.add_(bias->view(per_channel));
  }
  return in_atens_transposed_layout(output, input, weight, bias, geometry_params(plan.geometry),
                                    output_padding);
}

std::pair<at::Tensor, at::Tensor> compute_grads(const Plan& plan, const at::Tensor& grad_output,
                                                const at::Tensor& input, const at::Tensor& weight) {
  if (plan.input.strategy != Strategy::aten || plan.weight.strategy != Strategy::aten) {
    // Each gradient alone, aten's (planned, or where a strategy runs out of
    // memory) from the call's real operands.
    at::Tensor grad_input = compute(Gradient::input, plan, grad_output, weight, &input,
                                    op_gradient_memory_format(grad_output, weight),
                                    Served::input);
    return {std::move(grad_input),
            compute(Gradient::weight, plan, grad_output, input, &weight,
                    op_gradient_memory_format(input, grad_output), Served::weight)};
  }
  count_served(Served::input, plan.input);
  count_served(Served::weight, plan.weight);
  auto [grad_input, grad_weight] =
      aten_grads(grad_output, input, weight, geometry_params(plan.geometry));
  return {in_layout(grad_input, op_gradient_memory_format(grad_output, weight)),
          in_layout(grad_weight, op_gradient_memory_format(input, grad_output))};
}

at::Tensor gradient_with(Gradient gradient, Strategy strategy,
                         std::optional<Swap1x1Writer> writer, const at::Tensor& grad_output,
                         const at::Tensor& operand, at::IntArrayRef sizes,
                         const ConvParams& params) {
  const bool input = gradient == Gradient::input;
  const ConvGeometry geometry = backward_geometry(
      "bwdconv gradient_with", grad_output, input ? sizes : operand.sizes(),
      input ? operand.sizes() : sizes, input ? "weight" : "input", operand, params);
  Plan plan;
  try {
    plan = make_plan(geometry, strategy, writer);
  } catch (const std::invalid_argument& error) {
    TORCH_CHECK_VALUE(false, "bwdconv: ", error.what());
  }
  TORCH_CHECK_VALUE(plan.of(gradient).strategy == strategy, "bwdconv: ", strategy_name(strategy),
                    " cannot compute the ", gradient_name(gradient), " gradient of this shape");
  return input ? compute_grad_input(plan, grad_output, operand)
               : compute_grad_weight(plan, grad_output, operand);
}

std::pair<at::Tensor, at::Tensor> gradients_with(const Decision& decision,
                                                 const at::Tensor& grad_output,
                                                 const at::Tensor& input, const at::Tensor& weight,
                                                 const ConvParams& params) {
  const ConvGeometry geometry =
      backward_geometry("bwdconv gradients_with", grad_output, input.sizes(), weight.sizes(),
                        "weight", weight, params);
  const auto plan = make_decided_plan(geometry, decision);
  TORCH_CHECK_VALUE(plan && decision.input && decision.weight,
                    "bwdconv: a decision for both gradients that this shape can serve is needed");
  return compute_grads(*plan, grad_output, input, weight);
}

}  // namespace bwdconv::ops
