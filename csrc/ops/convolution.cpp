// The bwdconv operator library: schemas, the CPU / CUDA kernels (ROCm
// tensors use the CUDA key), autograd, and the calls into them through the
// dispatcher. One file for one op library, every dispatch key of it but
// autocast's (autocast.cpp).
//
// Autograd for the ops. The backward ops are bilinear, so each one's
// gradients are again bwdconv ops and every order of derivative is planned:
//   y  = conv(x, w)               -> dx = bwd_input(dy, w),  dw = bwd_weight(dy, x)
//   dx = bwd_input(dy, w)  (adjoint of conv in x)  -> d(dy) = conv(g, w),  dw = bwd_weight(dy, g)
//   dw = bwd_weight(dy, x) (adjoint of conv in w)  -> d(dy) = conv(x, g),  dx = bwd_input(dy, g)
#include "ops/precompiled.h"  // first, as the precompiled header must be

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/impl/TorchDispatchModeTLS.h>
#include <torch/autograd.h>
#include <torch/library.h>

#include <array>
#include <cstddef>
#include <tuple>
#include <vector>

#include "ops/convolution.h"

#include "ops/backward.h"
#include "ops/plans.h"
#include "ops/geometry.h"

namespace bwdconv::ops {
namespace {

ConvParams params_of(at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation,
                     int64_t groups) {
  return {stride, padding, dilation, groups};
}

at::Tensor convolution(const at::Tensor& input, const at::Tensor& weight,
                       const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                       at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups) {
  forward_geometry("bwdconv.convolution", input, weight, bias,
                   params_of(stride, padding, dilation, groups));
  const std::vector<int64_t> no_output_padding(stride.size(), 0);
  return at::convolution(settled(input), settled(weight), bias, stride, padding, dilation,
                         /*transposed=*/false, no_output_padding, groups);
}

at::Tensor convolution_backward_input(const at::Tensor& grad_output, const at::Tensor& weight,
                                      at::IntArrayRef input_size, at::IntArrayRef stride,
                                      at::IntArrayRef padding, at::IntArrayRef dilation,
                                      int64_t groups) {
  const ConvParams params = params_of(stride, padding, dilation, groups);
  const ConvGeometry geometry =
      backward_geometry("bwdconv.convolution_backward_input", grad_output, input_size,
                        weight.sizes(), "weight", weight, params);
  const BackwardCall call = backward_call(grad_output, nullptr, &weight, true, false, params);
  return compute_grad_input(*resolve_plan(geometry, &call).plan, grad_output, weight);
}

at::Tensor convolution_backward_weight(const at::Tensor& grad_output, const at::Tensor& input,
                                       at::IntArrayRef weight_size, at::IntArrayRef stride,
                                       at::IntArrayRef padding, at::IntArrayRef dilation,
                                       int64_t groups) {
  const ConvParams params = params_of(stride, padding, dilation, groups);
  const ConvGeometry geometry =
      backward_geometry("bwdconv.convolution_backward_weight", grad_output, input.sizes(),
                        weight_size, "input", input, params);
  const BackwardCall call = backward_call(grad_output, &input, nullptr, false, true, params);
  return compute_grad_weight(*resolve_plan(geometry, &call).plan, grad_output, input);
}

// The forward of a transposed convolution is the input gradient of the
// matching convolution, whose input has this call's output size and whose
// grad_output is this call's input (docs/DESIGN.md, "Transposed convolutions").
at::Tensor conv_transpose(const at::Tensor& input, const at::Tensor& weight,
                          const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                          at::IntArrayRef padding, at::IntArrayRef output_padding,
                          int64_t groups, at::IntArrayRef dilation) {
  const ConvParams params = params_of(stride, padding, dilation, groups);
  ConvGeometry geometry =
      transposed_geometry("bwdconv.conv_transpose", input, weight, bias, params, output_padding);
  geometry.transposed = true;
  const BackwardCall call = transposed_forward_call(input, weight, params);
  return compute_transposed_forward(*resolve_plan(geometry, &call).plan, input, weight, bias,
                                    output_padding);
}

std::tuple<at::Tensor, at::Tensor> convolution_backward(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight,
    at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups) {
  const ConvParams params = params_of(stride, padding, dilation, groups);
  const ConvGeometry geometry =
      backward_geometry("bwdconv.convolution_backward", grad_output, input.sizes(),
                        weight.sizes(), "weight", weight, params);
  TORCH_CHECK(input.scalar_type() == weight.scalar_type() && input.device() == weight.device(),
              "bwdconv.convolution_backward: expected input and weight of the same dtype and "
              "device, but got ", input.dtype(), " on ", input.device(), " and ", weight.dtype(),
              " on ", weight.device());
  const BackwardCall call = backward_call(grad_output, &input, &weight, true, true, params);
  return compute_grads(*resolve_plan(geometry, &call).plan, grad_output, input, weight);
}

}  // namespace

TORCH_LIBRARY(bwdconv, m) {
  m.def(
      "convolution(Tensor input, Tensor weight, Tensor? bias, int[] stride, int[] padding, "
      "int[] dilation, int groups) -> Tensor");
  m.def(
      "convolution_backward_input(Tensor grad_output, Tensor weight, SymInt[] input_size, "
      "int[] stride, int[] padding, int[] dilation, int groups) -> Tensor");
  m.def(
      "convolution_backward_weight(Tensor grad_output, Tensor input, SymInt[] weight_size, "
      "int[] stride, int[] padding, int[] dilation, int groups) -> Tensor");
  m.def(
      "conv_transpose(Tensor input, Tensor weight, Tensor? bias, int[] stride, int[] padding, "
      "int[] output_padding, int groups, int[] dilation) -> Tensor");
  m.def(
      "convolution_backward(Tensor grad_output, Tensor input, Tensor weight, int[] stride, "
      "int[] padding, int[] dilation, int groups) -> (Tensor grad_input, Tensor grad_weight)");
}

namespace {

// The same kernels serve CPU and GPU tensors: the strategies choose per device.
void register_kernels(torch::Library& m) {
  m.impl("convolution", TORCH_FN(convolution));
  m.impl("conv_transpose", TORCH_FN(conv_transpose));
  m.impl("convolution_backward_input", TORCH_FN(convolution_backward_input));
  m.impl("convolution_backward_weight", TORCH_FN(convolution_backward_weight));
  m.impl("convolution_backward", TORCH_FN(convolution_backward));
}

}  // namespace

TORCH_LIBRARY_IMPL(bwdconv, CPU, m) { register_kernels(m); }

TORCH_LIBRARY_IMPL(bwdconv, CUDA, m) { register_kernels(m); }

namespace {

template <typename Signature>
c10::TypedOperatorHandle<Signature> bwdconv_op(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "").typed<Signature>();
}

}  // namespace

at::Tensor call_convolution(const at::Tensor& input, const at::Tensor& weight,
                            const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                            at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups) {
  static auto op = bwdconv_op<at::Tensor(const at::Tensor&, const at::Tensor&,
                                         const std::optional<at::Tensor>&, at::IntArrayRef,
                                         at::IntArrayRef, at::IntArrayRef, int64_t)>(
      "bwdconv::convolution");
  return op.call(input, weight, bias, stride, padding, dilation, groups);
}

at::Tensor call_conv_transpose(const at::Tensor& input, const at::Tensor& weight,
                               const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                               at::IntArrayRef padding, at::IntArrayRef output_padding,
                               int64_t groups, at::IntArrayRef dilation) {
  static auto op = bwdconv_op<at::Tensor(const at::Tensor&, const at::Tensor&,
                                         const std::optional<at::Tensor>&, at::IntArrayRef,
                                         at::IntArrayRef, at::IntArrayRef, int64_t,
                                         at::IntArrayRef)>("bwdconv::conv_transpose");
  return op.call(input, weight, bias, stride, padding, output_padding, groups, dilation);
}

using BackwardSignature = at::Tensor(const at::Tensor&, const at::Tensor&, c10::SymIntArrayRef,
                                     at::IntArrayRef, at::IntArrayRef, at::IntArrayRef, int64_t);

at::Tensor call_backward_input(const at::Tensor& grad_output, const at::Tensor& weight,
                               c10::SymIntArrayRef input_size, at::IntArrayRef stride,
                               at::IntArrayRef padding, at::IntArrayRef dilation,
                               int64_t groups) {
  static auto op = bwdconv_op<BackwardSignature>("bwdconv::convolution_backward_input");
  return op.call(grad_output, weight, input_size, stride, padding, dilation, groups);
}

at::Tensor call_backward_weight(const at::Tensor& grad_output, const at::Tensor& input,
                                c10::SymIntArrayRef weight_size, at::IntArrayRef stride,
                                at::IntArrayRef padding, at::IntArrayRef dilation,
                                int64_t groups) {
  static auto op = bwdconv_op<BackwardSignature>("bwdconv::convolution_backward_weight");
  return op.call(grad_output, input, weight_size, stride, padding, dilation, groups);
}

std::tuple<at::Tensor, at::Tensor> call_backward_both(const at::Tensor& grad_output,
                                                      const at::Tensor& input,
                                                      const at::Tensor& weight,
                                                      at::IntArrayRef stride,
                                                      at::IntArrayRef padding,
                                                      at::IntArrayRef dilation, int64_t groups) {
  static auto op =
      bwdconv_op<std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&,
                                                    const at::Tensor&, at::IntArrayRef,
                                                    at::IntArrayRef, at::IntArrayRef, int64_t)>(
          "bwdconv::convolution_backward");
  return op.call(grad_output, input, weight, stride, padding, dilation, groups);
}


namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The arguments kept across forward and backward: stride, padding,
// dilation, groups, whether a bias was given and a transposed convolution's
// output padding, in one saved_data entry (each entry costs the call a
// hashed string key and an allocated list).
struct SavedParams {
  std::vector<int64_t> stride, padding, dilation;
  int64_t groups = 1;
  bool has_bias = false;
  std::vector<int64_t> output_padding;  // transposed only

  // [groups, has_bias, output padding's length, stride, padding, dilation, output padding]
  void save(AutogradContext* ctx) const {
    std::vector<int64_t> packed{groups, int64_t{has_bias},
                                static_cast<int64_t>(output_padding.size())};
    for (const auto* values : {&stride, &padding, &dilation, &output_padding}) {
      packed.insert(packed.end(), values->begin(), values->end());
    }
    ctx->saved_data["params"] = std::move(packed);
  }
  static SavedParams load(AutogradContext* ctx) {
    const std::vector<int64_t> packed = ctx->saved_data["params"].toIntVector();
    const size_t padded = static_cast<size_t>(packed[2]);
    const size_t n = (packed.size() - 3 - padded) / 3;
    auto values = [&](size_t index, size_t count) {
      const auto first = packed.begin() + 3 + static_cast<std::ptrdiff_t>(index * n);
      return std::vector<int64_t>(first, first + static_cast<std::ptrdiff_t>(count));
    };
    return {values(0, n), values(1, n), values(2, n), packed[0], packed[1] != 0,
            values(3, padded)};
  }
};

// A tensor ATen's kernels can run on directly: dense, on the CPU or a GPU,
// not a fake, functional or functorch wrapper (torch.compile and torch.func
// trace through the ops instead), nor a batched tensor of the older vmap
// (Batched: autograd.grad's is_grads_batched and gradcheck's batched
// gradients vmap the backward with it; its fallback gives the ops one
// sample at a time).
bool plain_tensor(const at::Tensor& t) {
  constexpr c10::DispatchKeySet kTraced({c10::DispatchKey::Python,
                                         c10::DispatchKey::PythonTLSSnapshot,
                                         c10::DispatchKey::Functionalize,
                                         c10::DispatchKey::FuncTorchBatched,
                                         c10::DispatchKey::Batched,
                                         c10::DispatchKey::FuncTorchGradWrapper});
  return t.defined() && t.layout() == at::kStrided && (t.is_cpu() || t.is_cuda()) &&
         !t.key_set().has_any(kTraced);
}

// A backward on plain tensors with no dispatch mode watching: eager, not traced.
bool eager(const at::Tensor& grad, const at::Tensor& input, const at::Tensor& weight) {
  return !c10::impl::dispatch_mode_enabled() && plain_tensor(grad) && plain_tensor(input) &&
         plain_tensor(weight);
}

// A backward on plain tensors with no graph to record: PyTorch's own
// autograd would make one aten::convolution_backward call with the forward's
// operands (its `transposed` flag and output padding) for every gradient
// wanted; that call, with the gradients bwdconv plans planned as the aten
// scope plans them, so that those aten computes, the bias's included, are
// aten's bit for bit and stride for stride. `bias_channels`: the output's.
std::tuple<at::Tensor, at::Tensor, at::Tensor> atens_own_backward(
    AutogradContext* ctx, const at::Tensor& grad, const at::Tensor& input,
    const at::Tensor& weight, const SavedParams& p, bool transposed,
    at::IntArrayRef output_padding, int64_t bias_channels) {
  // needs_input_grad counts only the tensors passed: the bias is edge 2 if present.
  const bool has_bias = p.has_bias;
  const std::vector<int64_t> bias_sizes{bias_channels};
  at::AutoDispatchBelowADInplaceOrView guard;  // as aten's kernel runs
  return planned_convolution_backward(
      grad, input, weight,
      has_bias ? at::OptionalIntArrayRef(bias_sizes) : at::OptionalIntArrayRef(), p.stride,
      p.padding, p.dilation, transposed, output_padding, p.groups,
      {ctx->needs_input_grad(0), ctx->needs_input_grad(1), has_bias && ctx->needs_input_grad(2)});
}

// The node a tensor joins to depend, for autograd, on `grad`, `input` and
// `weight` without reading them: its gradient passes to the tensor, theirs
// are zero (undefined), as aten's double-backward node gives for a gradient
// that does not depend on them.
class DependsOnFunction : public torch::autograd::Function<DependsOnFunction> {
 public:
  static at::Tensor forward(AutogradContext*, const at::Tensor& value, const at::Tensor&,
                            const at::Tensor&, const at::Tensor&) {
    return value.detach();  // a new tensor, not a view: an op's fresh result, as aten's is
  }
  static variable_list backward(AutogradContext*, variable_list grads) {
    return {grads[0], {}, {}, {}};
  }
};

// create_graph: the gradients bwdconv's ops computed, as aten's double-
// backward node returns them. Each op's result is laid out by PyTorch's meta
// rule (as traced graphs expect); it is restrided, differentiably, as aten's
// backend lays it out. aten's node takes grad_output, input and weight, so
// every gradient it returns requires grad when any of those does, whether or
// not it depends on it; bwdconv's ops take only what they read.
void as_atens_gradients(at::Tensor& grad_input, at::Tensor& grad_weight, at::Tensor& grad_bias,
                        const at::Tensor& grad, const at::Tensor& input,
                        const at::Tensor& weight, const GradientFormats& formats) {
  if (grad_input.defined()) grad_input = in_layout(grad_input, formats.input);
  if (grad_weight.defined()) grad_weight = in_layout(grad_weight, formats.weight);
  if (!(grad.requires_grad() || input.requires_grad() || weight.requires_grad())) return;
  for (at::Tensor* gradient : {&grad_input, &grad_weight, &grad_bias}) {
    if (gradient->defined() && !gradient->requires_grad()) {
      *gradient = DependsOnFunction::apply(*gradient, grad, input, weight);
    }
  }
}

class ConvolutionFunction : public torch::autograd::Function<ConvolutionFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input,
                            const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                            at::IntArrayRef stride, at::IntArrayRef padding,
                            at::IntArrayRef dilation, int64_t groups) {
    at::AutoDispatchBelowADInplaceOrView guard;
    ctx->save_for_backward({input, weight});
    SavedParams{stride.vec(), padding.vec(), dilation.vec(), groups,
                bias.has_value() && bias->defined()}
        .save(ctx);
    return call_convolution(input, weight, bias, stride, padding, dilation, groups);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &input = saved[0], &weight = saved[1];
    const auto p = SavedParams::load(ctx);
    const at::Tensor& grad = grads[0];
    // needs_input_grad counts only the tensors passed: the bias is edge 2 if present.
    const bool has_bias = p.has_bias;
    const bool is_eager = eager(grad, input, weight);
    // Only read on plain tensors (a traced weight's sizes can be symbolic).
    const std::vector<int64_t> bias_sizes{is_eager ? weight.size(0) : 0};
    const at::OptionalIntArrayRef bias_sizes_if_any =
        has_bias ? at::OptionalIntArrayRef(bias_sizes) : at::OptionalIntArrayRef();
    if (is_eager && !at::GradMode::is_enabled()) {
      const std::vector<int64_t> no_output_padding(p.stride.size(), 0);
      auto [gi, gw, gb] = atens_own_backward(ctx, grad, input, weight, p, /*transposed=*/false,
                                             no_output_padding, weight.size(0));
      return {gi, gw, gb, {}, {}, {}, {}};
    }
    at::Tensor grad_input, grad_weight, grad_bias;
    if (ctx->needs_input_grad(0) && ctx->needs_input_grad(1)) {
      // One op for both, so that aten can compute them in one call.
      std::tie(grad_input, grad_weight) =
          call_backward_both(grad, input, weight, p.stride, p.padding, p.dilation, p.groups);
    } else if (ctx->needs_input_grad(0)) {
      grad_input = call_backward_input(grad, weight, input.sym_sizes(), p.stride, p.padding,
                                       p.dilation, p.groups);
    } else if (ctx->needs_input_grad(1)) {
      grad_weight = call_backward_weight(grad, input, weight.sym_sizes(), p.stride, p.padding,
                                         p.dilation, p.groups);
    }
    if (has_bias && ctx->needs_input_grad(2)) grad_bias = compute_grad_bias(grad);
    if (is_eager) {
      as_atens_gradients(grad_input, grad_weight, grad_bias, grad, input, weight,
                         aten_gradient_formats(input, weight, bias_sizes_if_any, p.stride,
                                               p.padding, p.dilation, p.groups));
    }
    return {grad_input, grad_weight, grad_bias, {}, {}, {}, {}};
  }
};

// y = conv_transpose(x, w) is dx of the matching convolution with grad_output
// x (docs/DESIGN.md, "Transposed convolutions"), so with g the gradient of y:
// dx = conv(g, w) and dw = bwd_weight(x, g) with g as that convolution's input.
class ConvTransposeFunction : public torch::autograd::Function<ConvTransposeFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input,
                            const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                            at::IntArrayRef stride, at::IntArrayRef padding,
                            at::IntArrayRef output_padding, int64_t groups,
                            at::IntArrayRef dilation) {
    at::AutoDispatchBelowADInplaceOrView guard;
    ctx->save_for_backward({input, weight});
    SavedParams{stride.vec(), padding.vec(), dilation.vec(), groups,
                bias.has_value() && bias->defined(), output_padding.vec()}
        .save(ctx);
    return call_conv_transpose(input, weight, bias, stride, padding, output_padding, groups,
                               dilation);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &input = saved[0], &weight = saved[1];
    const auto p = SavedParams::load(ctx);
    const at::Tensor& g = grads[0];
    if (eager(g, input, weight) && !at::GradMode::is_enabled()) {
      auto [gi, gw, gb] =
          atens_own_backward(ctx, g, input, weight, p, /*transposed=*/true,
                             p.output_padding,
                             weight.size(1) * p.groups);
      return {gi, gw, gb, {}, {}, {}, {}, {}};
    }
    at::Tensor grad_input, grad_weight, grad_bias;
    if (ctx->needs_input_grad(0)) {
      grad_input =
          call_convolution(g, weight, std::nullopt, p.stride, p.padding, p.dilation, p.groups);
    }
    if (ctx->needs_input_grad(1)) {
      grad_weight = call_backward_weight(input, g, weight.sym_sizes(), p.stride, p.padding,
                                         p.dilation, p.groups);
    }
    if (p.has_bias && ctx->needs_input_grad(2)) {
      grad_bias = compute_grad_bias(g);
    }
    if (eager(g, input, weight)) {
      as_atens_gradients(grad_input, grad_weight, grad_bias, g, input, weight,
                         aten_transposed_formats(
                             input, weight, p.has_bias,
                             ConvParams{p.stride, p.padding, p.dilation, p.groups},
                             p.output_padding));
    }
    return {grad_input, grad_weight, grad_bias, {}, {}, {}, {}, {}};
  }
};

// The two backward ops: `operand` is the weight (Adjoint::input: the op
// computes dx) or the input (Adjoint::weight: the op computes dw).
enum class Adjoint { input, weight };

at::Tensor call_backward(Adjoint adjoint, const at::Tensor& grad_output,
                         const at::Tensor& operand, c10::SymIntArrayRef size,
                         at::IntArrayRef stride, at::IntArrayRef padding,
                         at::IntArrayRef dilation, int64_t groups) {
  return adjoint == Adjoint::input
             ? call_backward_input(grad_output, operand, size, stride, padding, dilation, groups)
             : call_backward_weight(grad_output, operand, size, stride, padding, dilation, groups);
}

at::Tensor call_backward(Adjoint adjoint, const at::Tensor& grad_output,
                         const at::Tensor& operand, c10::SymIntArrayRef size,
                         const SavedParams& p) {
  return call_backward(adjoint, grad_output, operand, size, p.stride, p.padding, p.dilation,
                       p.groups);
}

template <Adjoint kAdjoint>
class BackwardFunction : public torch::autograd::Function<BackwardFunction<kAdjoint>> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& grad_output,
                            const at::Tensor& operand, c10::SymIntArrayRef size,
                            at::IntArrayRef stride, at::IntArrayRef padding,
                            at::IntArrayRef dilation, int64_t groups) {
    at::AutoDispatchBelowADInplaceOrView guard;
    ctx->save_for_backward({grad_output, operand});
    const SavedParams p{stride.vec(), padding.vec(), dilation.vec(), groups};
    p.save(ctx);
    return call_backward(kAdjoint, grad_output, operand, size, p);
  }

  // g is the gradient with respect to this op's output (a dx for
  // Adjoint::input, a dw for Adjoint::weight).
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &grad_output = saved[0], &operand = saved[1];
    const auto p = SavedParams::load(ctx);
    const at::Tensor& g = grads[0];
    constexpr bool computes_dx = kAdjoint == Adjoint::input;
    at::Tensor grad_grad_output, grad_operand;
    if (ctx->needs_input_grad(0)) {
      const at::Tensor& x = computes_dx ? g : operand;
      const at::Tensor& w = computes_dx ? operand : g;
      grad_grad_output = call_convolution(x, w, std::nullopt, p.stride, p.padding, p.dilation,
                                          p.groups);
    }
    if (ctx->needs_input_grad(1)) {
      // dx = bwd_input(dy, w) is linear in w with adjoint w -> bwd_weight(dy, .), and
      // dw = bwd_weight(dy, x) is linear in x with adjoint x -> bwd_input(dy, .).
      constexpr Adjoint other = computes_dx ? Adjoint::weight : Adjoint::input;
      grad_operand = call_backward(other, grad_output, g, operand.sym_sizes(), p);
    }
    return {grad_grad_output, grad_operand, {}, {}, {}, {}, {}};
  }
};

// (dx, dw) = (bwd_input(dy, w), bwd_weight(dy, x)); with gx, gw the
// gradients of dx and dw: d(dy) = conv(gx, w) + conv(x, gw),
// dx' = bwd_input(dy, gw), dw' = bwd_weight(dy, gx).
class BackwardBothFunction : public torch::autograd::Function<BackwardBothFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const at::Tensor& grad_output,
                               const at::Tensor& input, const at::Tensor& weight,
                               at::IntArrayRef stride, at::IntArrayRef padding,
                               at::IntArrayRef dilation, int64_t groups) {
    at::AutoDispatchBelowADInplaceOrView guard;
    ctx->save_for_backward({grad_output, input, weight});
    SavedParams{stride.vec(), padding.vec(), dilation.vec(), groups}.save(ctx);
    auto [grad_input, grad_weight] =
        call_backward_both(grad_output, input, weight, stride, padding, dilation, groups);
    return {grad_input, grad_weight};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &grad_output = saved[0], &input = saved[1], &weight = saved[2];
    const auto p = SavedParams::load(ctx);
    const at::Tensor &g_input = grads[0], &g_weight = grads[1];
    at::Tensor grad_grad_output, grad_input, grad_weight;
    if (ctx->needs_input_grad(0)) {
      grad_grad_output = call_convolution(g_input, weight, std::nullopt, p.stride, p.padding,
                                          p.dilation, p.groups) +
                         call_convolution(input, g_weight, std::nullopt, p.stride, p.padding,
                                          p.dilation, p.groups);
    }
    if (ctx->needs_input_grad(1)) {
      grad_input = call_backward(Adjoint::input, grad_output, g_weight, input.sym_sizes(), p);
    }
    if (ctx->needs_input_grad(2)) {
      grad_weight = call_backward(Adjoint::weight, grad_output, g_input, weight.sym_sizes(), p);
    }
    return {grad_grad_output, grad_input, grad_weight, {}, {}, {}, {}};
  }
};

// Whether autograd has to see an operand: it needs a gradient (grad mode on),
// or it carries a forward-mode tangent (which no_grad does not switch off).
bool needs_autograd(const at::Tensor& t) {
  return t.defined() &&
         ((at::GradMode::is_enabled() && t.requires_grad()) || t._fw_grad(/*level=*/0).defined());
}
bool needs_autograd(const std::optional<at::Tensor>& t) { return t && needs_autograd(*t); }

// Autograd records a node only when an operand needs it; otherwise (a plain
// backward pass, inference) the op runs below autograd at once: no node,
// saved tensors or saved parameters per call.
template <typename Recorded, typename Plain, typename... Operands>
auto recorded_if_needed(Recorded recorded, Plain plain, const Operands&... operands) {
  if ((needs_autograd(operands) || ...)) return recorded();
  at::AutoDispatchBelowADInplaceOrView guard;
  return plain();
}

std::tuple<at::Tensor, at::Tensor> backward_both_autograd(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight,
    at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups) {
  return recorded_if_needed(
      [&] {
        auto grads = BackwardBothFunction::apply(grad_output, input, weight, stride, padding,
                                                 dilation, groups);
        return std::make_tuple(grads[0], grads[1]);
      },
      [&] {
        return call_backward_both(grad_output, input, weight, stride, padding, dilation, groups);
      },
      grad_output, input, weight);
}

at::Tensor convolution_autograd(const at::Tensor& input, const at::Tensor& weight,
                                const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                                at::IntArrayRef padding, at::IntArrayRef dilation,
                                int64_t groups) {
  return recorded_if_needed(
      [&] {
        return ConvolutionFunction::apply(input, weight, bias, stride, padding, dilation, groups);
      },
      [&] { return call_convolution(input, weight, bias, stride, padding, dilation, groups); },
      input, weight, bias);
}

at::Tensor conv_transpose_autograd(const at::Tensor& input, const at::Tensor& weight,
                                   const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                                   at::IntArrayRef padding, at::IntArrayRef output_padding,
                                   int64_t groups, at::IntArrayRef dilation) {
  return recorded_if_needed(
      [&] {
        const TransposedForwardRecording recording(input, weight);
        return ConvTransposeFunction::apply(input, weight, bias, stride, padding,
                                            output_padding, groups, dilation);
      },
      [&] {
        return call_conv_transpose(input, weight, bias, stride, padding, output_padding,
                                   groups, dilation);
      },
      input, weight, bias);
}

// The two backward ops (see Adjoint).
template <Adjoint kAdjoint>
at::Tensor backward_autograd(const at::Tensor& grad_output, const at::Tensor& operand,
                             c10::SymIntArrayRef size, at::IntArrayRef stride,
                             at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups) {
  return recorded_if_needed(
      [&] {
        return BackwardFunction<kAdjoint>::apply(grad_output, operand, size, stride, padding,
                                                 dilation, groups);
      },
      [&] {
        return call_backward(kAdjoint, grad_output, operand, size, stride, padding, dilation,
                             groups);
      },
      grad_output, operand);
}

}  // namespace

TORCH_LIBRARY_IMPL(bwdconv, Autograd, m) {
  m.impl("convolution", TORCH_FN(convolution_autograd));
  m.impl("conv_transpose", TORCH_FN(conv_transpose_autograd));
  m.impl("convolution_backward_input", TORCH_FN(backward_autograd<Adjoint::input>));
  m.impl("convolution_backward_weight", TORCH_FN(backward_autograd<Adjoint::weight>));
  m.impl("convolution_backward", TORCH_FN(backward_both_autograd));
}

}  // namespace bwdconv::ops
