#include "ops/precompiled.h"  // first, as the precompiled header must be

#include "ops/backward.h"

#include <ATen/native/ConvUtils.h>
#include <ATen/ops/convolution_backward_native.h>
#include <ATen/ops/convolution_native.h>
#include <c10/util/Exception.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <tuple>
#include <vector>

#include "ops/aten.h"
#include "ops/phase.h"
#include "ops/phase_stacked.h"
#include "ops/plans.h"
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

namespace {

using Gradients = std::tuple<at::Tensor, at::Tensor, at::Tensor>;

// One aten::convolution_backward call's arguments, as the dispatcher gives them.
struct BackwardArguments {
  const at::Tensor& grad_output;
  const at::Tensor& input;
  const at::Tensor& weight;
  at::OptionalIntArrayRef bias_sizes;
  at::IntArrayRef stride, padding, dilation;
  bool transposed;
  at::IntArrayRef output_padding;
  int64_t groups;

  ConvParams params() const { return {stride, padding, dilation, groups}; }
};

// aten's own kernel for the gradients in `mask`.
Gradients native_backward(const BackwardArguments& a, std::array<bool, 3> mask) {
  return at::native::convolution_backward(a.grad_output, a.input, a.weight, a.bias_sizes,
                                          a.stride, a.padding, a.dilation, a.transposed,
                                          a.output_padding, a.groups, mask);
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

GradientFormats aten_transposed_formats(const at::Tensor& input, const at::Tensor& weight,
                                        bool has_bias, const ConvParams& params,
                                        at::IntArrayRef output_padding) {
  const std::vector<int64_t> bias_sizes{weight.size(1) * params.groups};
  return aten_gradient_formats(
      input, weight, has_bias ? at::OptionalIntArrayRef(bias_sizes) : at::OptionalIntArrayRef(),
      params.stride, params.padding, params.dilation, params.groups, /*transposed=*/true,
      output_padding);
}

at::Tensor in_atens_transposed_layout(const at::Tensor& output, const at::Tensor& input,
                                      const at::Tensor& weight,
                                      const std::optional<at::Tensor>& bias,
                                      const ConvParams& params, at::IntArrayRef output_padding) {
  // aten's channels_last outputs are a subset of the meta rule's: a
  // contiguous output is aten's layout already, and the check costs nothing.
  if (output.is_contiguous()) return output;
  const bool has_bias = bias && bias->defined();
  return in_layout(output,
                   aten_transposed_formats(input, weight, has_bias, params, output_padding).input);
}

namespace {

// The plan of a transposed convolution's backward: its weight gradient is
// the matching convolution's, whose grad_output is this call's input and
// whose input is this call's grad_output (docs/DESIGN.md, "Transposed
// convolutions"); nullptr where bwdconv does not plan it (no weight gradient
// wanted, or invalid).
PlanLookup transposed_backward_plan(const BackwardArguments& a, std::array<bool, 3> mask) {
  if (!mask[1]) return {};
  const ConvParams params = a.params();
  const auto geometry = plannable_transposed_geometry(a.input, a.weight, std::nullopt, params,
                                                      a.output_padding, a.grad_output.sizes());
  if (!geometry) return {};
  const BackwardCall call = backward_call(a.input, &a.grad_output, nullptr, false, true, params);
  return resolve_plan(*geometry, &call);
}

// A transposed convolution's gradients: the input gradient (a forward
// convolution) and the bias gradient are aten's, the weight gradient as planned.
Gradients transposed_backward(const BackwardArguments& a, std::array<bool, 3> mask,
                              const Plan& plan) {
  if (plan.weight.strategy == Strategy::aten) {
    count_served(Served::weight, plan.weight);
    return native_backward(a, mask);
  }
  Gradients grads;
  if (mask[0] || mask[2]) grads = native_backward(a, {mask[0], false, mask[2]});
  const GradientFormats formats =
      aten_gradient_formats(a.input, a.weight, a.bias_sizes, a.stride, a.padding, a.dilation,
                            a.groups, /*transposed=*/true, a.output_padding);
  std::get<1>(grads) =
      in_layout(compute_grad_weight(plan, a.input, a.grad_output), formats.weight);
  return grads;
}

// The grad_output a convolution's backward is planned with and bwdconv's
// strategies read: the caller's when its layout is the one PyTorch's rule
// gives the forward's output (that of the input or the weight), else a copy
// dense in that layout. So the plan has the layout the functional router
// predicted from the forward's operands (docs/DESIGN.md, "Pass-through"),
// whatever layout autograd sends the gradient in: the expanded one of
// out.sum() (read as contiguous), the contiguous one of a flatten's
// backward. An expanded gradient of a contiguous output is kept: the
// strategies read it as it is, and a copy would cost them a pass. A call
// whose operands differ in rank is kept for aten to reject.
at::Tensor in_output_layout(const at::Tensor& grad_output, const at::Tensor& input,
                            const at::Tensor& weight) {
  if (grad_output.dim() != input.dim() || weight.dim() != input.dim()) return grad_output;
  const at::MemoryFormat format = gradient_memory_format(input, weight);
  return grad_output.suggest_memory_format() == format ? grad_output
                                                       : grad_output.contiguous(format);
}

// The plan of a convolution's backward (nullptr: bwdconv does not plan it),
// with `grad_output` in the output's layout (in_output_layout).
PlanLookup forward_backward_plan(const BackwardArguments& a, std::array<bool, 3> mask,
                                 const at::Tensor& grad_output) {
  const ConvParams params = a.params();
  const auto geometry = plannable_geometry(grad_output, a.input, a.weight, params);
  if (!geometry) return {};
  const BackwardCall call =
      backward_call(grad_output, &a.input, &a.weight, mask[0], mask[1], params);
  return resolve_plan(*geometry, &call);
}

// A convolution's gradients: those planned for aten (and the bias) from
// aten's own kernel with the caller's arguments, so that they are aten's
// results stride for stride; bwdconv's laid out as aten's backend lays out
// its results. `laid_out`: grad_output in the output's layout where the
// caller made it already (else undefined).
Gradients forward_backward(const BackwardArguments& a, std::array<bool, 3> mask,
                           const Plan& plan, const at::Tensor& laid_out) {
  const bool input_by_us = mask[0] && plan.input.strategy != Strategy::aten;
  const bool weight_by_us = mask[1] && plan.weight.strategy != Strategy::aten;
  const std::array<bool, 3> aten_mask{mask[0] && !input_by_us, mask[1] && !weight_by_us,
                                      mask[2]};
  Gradients grads;
  if (aten_mask[0] || aten_mask[1] || aten_mask[2]) grads = native_backward(a, aten_mask);
  if (aten_mask[0]) count_served(Served::input, plan.input);
  if (aten_mask[1]) count_served(Served::weight, plan.weight);
  if (!input_by_us && !weight_by_us) return grads;
  auto& [grad_input, grad_weight, grad_bias] = grads;
  const at::Tensor grad_output =
      laid_out.defined() ? laid_out : in_output_layout(a.grad_output, a.input, a.weight);
  const GradientFormats formats = aten_gradient_formats(
      a.input, a.weight, a.bias_sizes, a.stride, a.padding, a.dilation, a.groups);
  if (input_by_us) {
    grad_input = in_layout(compute_grad_input(plan, grad_output, a.weight), formats.input);
  }
  if (weight_by_us) {
    grad_weight = in_layout(compute_grad_weight(plan, grad_output, a.input), formats.weight);
  }
  return grads;
}

// Every field of a convolution_backward call that its validity and plan
// depend on.
CallKey backward_key(const BackwardArguments& a, std::array<bool, 3> mask) {
  CallKey key;
  key.add(static_cast<int64_t>(KeyTag::aten_backward));
  key.add(int64_t{mask[0]} | int64_t{mask[1]} << 1 | int64_t{mask[2]} << 2 |
          int64_t{a.transposed} << 3 | int64_t{a.bias_sizes.has_value()} << 4);
  key.add_operand(a.grad_output);
  key.add_operand(a.input);
  key.add_operand(a.weight);
  if (a.bias_sizes) key.add(*a.bias_sizes);
  key.add_arguments(a.params(), a.output_padding);
  return key;
}

}  // namespace

Gradients planned_convolution_backward(const at::Tensor& grad_output, const at::Tensor& input,
                                       const at::Tensor& weight,
                                       at::OptionalIntArrayRef bias_sizes,
                                       at::IntArrayRef stride, at::IntArrayRef padding,
                                       at::IntArrayRef dilation, bool transposed,
                                       at::IntArrayRef output_padding, int64_t groups,
                                       std::array<bool, 3> output_mask) {
  const BackwardArguments a{grad_output, input,     weight,         bias_sizes, stride,
                            padding,     dilation,  transposed,     output_padding, groups};
  // The autotuner's own calls measure aten's kernel: its baselines (the
  // memory budget's, the backward after a transposed forward).
  if (tuning_on_this_thread()) return native_backward(a, output_mask);
  const CachedPlan cached(backward_key(a, output_mask));
  std::shared_ptr<const Plan> plan;
  at::Tensor laid_out;  // grad_output as the plan was made with it, where it was made
  if (!cached.found()) {
    if (!transposed) laid_out = in_output_layout(a.grad_output, a.input, a.weight);
    PlanLookup lookup = transposed ? transposed_backward_plan(a, output_mask)
                                   : forward_backward_plan(a, output_mask, laid_out);
    if (!lookup.pending) cached.keep(lookup.plan);
    plan = std::move(lookup.plan);
  } else if (const PlanSummary& known = cached.summary(); !known.planned) {
    return native_backward(a, output_mask);
  } else if (const bool planned_input = output_mask[0] && !transposed;
             known.aten_computes_all(planned_input, output_mask[1])) {
    // Planned for aten (a transposed call plans its weight gradient alone):
    // counted from the entry, computed by aten's kernel.
    if (planned_input) count_served(Served::input, Strategy::aten, known.input_measured);
    if (output_mask[1]) count_served(Served::weight, Strategy::aten, known.weight_measured);
    return native_backward(a, output_mask);
  } else {
    plan = cached.plan();
  }
  if (!plan) return native_backward(a, output_mask);
  return transposed ? transposed_backward(a, output_mask, *plan)
                    : forward_backward(a, output_mask, *plan, laid_out);
}

}  // namespace bwdconv::ops
