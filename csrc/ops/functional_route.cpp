#include "ops/precompiled.h"  // first, as the precompiled header must be

#include "ops/functional_route.h"

#include <ATen/PythonTorchFunctionTLS.h>
#include <ATen/autocast_mode.h>
#include <ATen/core/grad_mode.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/util/SmallVector.h>
#include <pybind11/pybind11.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/jit/frontend/tracer.h>

#include <array>
#include <utility>
#include <optional>

#include "ops/aten_scope.h"
#include "ops/backward.h"
#include "ops/convolution.h"
#include "ops/geometry.h"
#include "ops/plans.h"

namespace bwdconv::ops {
namespace {

// The signatures of torch.nn.functional's conv{1,2,3}d and conv_transpose{1,2,3}d.
struct Signature {
  std::array<const char*, 8> names;
  size_t count;
  size_t stride, padding, dilation, groups;
  std::optional<size_t> output_padding;  // transposed only
};
constexpr size_t kInput = 0, kWeight = 1, kBias = 2;
constexpr Signature kConvolution{
    {"input", "weight", "bias", "stride", "padding", "dilation", "groups", nullptr},
    7, 3, 4, 5, 6, std::nullopt};
constexpr Signature kTransposed{
    {"input", "weight", "bias", "stride", "padding", "output_padding", "groups", "dilation"},
    8, 3, 4, 7, 6, 5};
using BoundArguments = std::array<PyObject*, 8>;

// The arguments by position in the signature (nullptr: not given), or nothing
// when they do not bind: the original function raises PyTorch's TypeError.
std::optional<BoundArguments> bind(const Signature& signature, PyObject* args,
                                   PyObject* kwargs) {
  BoundArguments bound{};
  const Py_ssize_t positional = PyTuple_GET_SIZE(args);
  if (positional > static_cast<Py_ssize_t>(signature.count)) return std::nullopt;
  for (Py_ssize_t i = 0; i < positional; ++i) bound[i] = PyTuple_GET_ITEM(args, i);
  if (kwargs == nullptr || kwargs == Py_None) return bound;
  Py_ssize_t position = 0;
  PyObject *name, *value;
  while (PyDict_Next(kwargs, &position, &name, &value)) {
    size_t index = 0;
    while (index < signature.count &&
           PyUnicode_CompareWithASCIIString(name, signature.names[index]) != 0) {
      ++index;
    }
    if (index == signature.count || bound[index] != nullptr) return std::nullopt;
    bound[index] = value;
  }
  return bound;
}

// A module attribute read on every call without calling Python: the module's
// dict and the interned name are found once (the module stays loaded).
class ModuleAttribute {
 public:
  ModuleAttribute(const char* module, const char* name)
      : dict_(PyModule_GetDict(PyImport_ImportModule(module))),
        name_(PyUnicode_InternFromString(name)) {}
  // Borrowed; null when absent. The name is an interned str, so the lookup
  // cannot raise.
  PyObject* get() const { return PyDict_GetItemWithError(dict_, name_); }

 private:
  PyObject* dict_;
  PyObject* name_;
};

bool exporting() {
  static const ModuleAttribute flag("torch.compiler", "_is_exporting_flag");
  PyObject* value = flag.get();
  return value != nullptr && PyObject_IsTrue(value) == 1;
}

bool forward_ad_level_open() {
  static const ModuleAttribute level("torch.autograd.forward_ad", "_current_level");
  PyObject* value = level.get();
  return value != nullptr && PyLong_Check(value) && PyLong_AsLong(value) >= 0;
}

// torch.func's transforms include their front-mode key for as long as one
// is active on the thread.
bool inside_functorch_transform() {
  return c10::impl::tls_local_dispatch_key_set().included_.has(
      c10::DispatchKey::FuncTorchDynamicLayerFrontMode);
}

// What bwdconv.functional's _plans refuses, so that the call goes to the
// original: operands that are not plain tensors (or parameters) of a planned
// dtype on the CPU or a GPU, zero-size ones, no gradient needed (where a
// gradient is all bwdconv plans), a torch.func transform, forward-mode AD,
// torch.export or torch.jit tracing.
bool planned_operands(PyObject* input, PyObject* weight, PyObject* bias, bool gradient_needed) {
  if (input == nullptr || weight == nullptr || !THPVariable_CheckExact(input) ||
      !THPVariable_CheckExact(weight)) {
    return false;
  }
  if (bias != nullptr && bias != Py_None && !THPVariable_CheckExact(bias)) return false;
  const at::Tensor& x = THPVariable_Unpack(input);
  const at::Tensor& w = THPVariable_Unpack(weight);
  const at::ScalarType dtype = x.scalar_type();
  if ((dtype != at::kDouble && dtype != at::kFloat && dtype != at::kHalf &&
       dtype != at::kBFloat16) ||
      !(x.is_cpu() || x.is_cuda()) || x.numel() == 0 || w.numel() == 0) {
    return false;
  }
  const bool needs_gradient =
      at::GradMode::is_enabled() && (x.requires_grad() || w.requires_grad());
  if (gradient_needed && !needs_gradient) return false;
  return !inside_functorch_transform() && !forward_ad_level_open() &&
         !exporting() && !torch::jit::tracer::isTracing();
}

// Per spatial dim; inline, so that reading a call allocates nothing.
using Values = c10::SmallVector<int64_t, 3>;

// A Python int that fits in int64_t, else nothing (and no Python error left set).
std::optional<int64_t> exact_int(PyObject* value) {
  if (!PyLong_CheckExact(value)) return std::nullopt;
  const long long result = PyLong_AsLongLong(value);
  if (result == -1 && PyErr_Occurred()) {
    PyErr_Clear();
    return std::nullopt;
  }
  return result;
}

void repeat(int count, int64_t value, Values& values) {
  values.assign(static_cast<size_t>(count), value);
}

// Reads an int or a sequence of ints, one per spatial dim or one for all, as
// bwdconv.functional's expand reads it, into `values`; false for anything
// else. Written in place: the router reads every call.
bool read_per_dim_values(PyObject* value, int spatial_dims, int64_t default_value,
                         Values& values) {
  if (value == nullptr) {
    repeat(spatial_dims, default_value, values);
    return true;
  }
  if (PyLong_CheckExact(value)) {
    const auto single = exact_int(value);
    if (single) repeat(spatial_dims, *single, values);
    return single.has_value();
  }
  if (!PyTuple_Check(value) && !PyList_Check(value)) return false;
  const Py_ssize_t length = PySequence_Fast_GET_SIZE(value);
  if (length != 1 && length != spatial_dims) return false;
  PyObject** items = PySequence_Fast_ITEMS(value);
  values.clear();
  for (int i = 0; i < spatial_dims; ++i) {
    const auto item = exact_int(items[length == 1 ? 0 : i]);
    if (!item) return false;
    values.push_back(*item);
  }
  return true;
}

// Reads a string padding into `padding`: "valid" is none, "same" (stride 1
// only) is the left half of the dilated filter's extent on both sides, as
// bwdconv.functional pads it when the extent is even; false for the rest
// (the Python wrapper pads odd extents itself, or raises PyTorch's error).
bool read_string_padding(PyObject* name, const Values& stride, const Values& dilation,
                         const at::Tensor& weight, Values& padding) {
  const int n = static_cast<int>(stride.size());
  if (PyUnicode_CompareWithASCIIString(name, "valid") == 0) {
    repeat(n, 0, padding);
    return true;
  }
  if (PyUnicode_CompareWithASCIIString(name, "same") != 0) return false;
  padding.clear();
  for (int i = 0; i < n; ++i) {
    const int64_t extent = dilation[i] * (weight.size(i + 2) - 1);
    if (stride[i] != 1 || extent % 2 != 0) return false;
    padding.push_back(extent / 2);
  }
  return true;
}

// A call's stride, padding, dilation, output padding and groups.
struct Arguments {
  Values stride, padding, dilation, output_padding;
  int64_t groups = 1;

  ConvParams params() const { return {stride, padding, dilation, groups}; }
};

// Reads the call's arguments into `a`; false when they are not plain ints
// that bwdconv.functional would read the same way.
bool read_arguments(const Signature& signature, const BoundArguments& bound, int spatial_dims,
                    const at::Tensor& weight, Arguments& a) {
  if (weight.dim() != spatial_dims + 2 ||
      !read_per_dim_values(bound[signature.stride], spatial_dims, 1, a.stride) ||
      !read_per_dim_values(bound[signature.dilation], spatial_dims, 1, a.dilation)) {
    return false;
  }
  PyObject* padding = bound[signature.padding];
  const bool named_padding = padding != nullptr && PyUnicode_Check(padding);
  if (named_padding && signature.output_padding) return false;
  if (named_padding ? !read_string_padding(padding, a.stride, a.dilation, weight, a.padding)
                    : !read_per_dim_values(padding, spatial_dims, 0, a.padding)) {
    return false;
  }
  if (signature.output_padding &&
      !read_per_dim_values(bound[*signature.output_padding], spatial_dims, 0,
                           a.output_padding)) {
    return false;
  }
  if (bound[signature.groups] != nullptr) {
    const auto groups = exact_int(bound[signature.groups]);
    if (!groups) return false;
    a.groups = *groups;
  }
  return true;
}

// Where a call goes: the original function, because bwdconv does not plan
// it (or it is invalid, and the original raises); the original function
// because every gradient it needs (and a transposed forward) is planned for
// aten; bwdconv's op, called from here with the arguments read here; or
// bwdconv's Python wrapper, for a call whose arguments only it normalises
// (an unbatched input, 'same' padding with an odd extent, numbers of other
// types) or made under a torch function mode, which sees the op it calls.
enum class Route { original, aten, bwdconv, python };

// A routed call: where it goes and, for Route::bwdconv, its operands (as
// the convolution computes with them) and arguments as read. The operands
// are the caller's (owned by its arguments: not copied, as a copy of a
// Python tensor's handle takes the GIL's state twice), or autocast's casts.
struct RoutedCall {
  Route route = Route::original;
  const at::Tensor* given_input = nullptr;
  const at::Tensor* given_weight = nullptr;
  at::Tensor cast_input, cast_weight;  // defined where autocast casts them
  std::optional<at::Tensor> bias;
  Arguments arguments;
  std::optional<at::ScalarType> autocast;  // the dtype autocast computes in

  const at::Tensor& input() const { return cast_input.defined() ? cast_input : *given_input; }
  const at::Tensor& weight() const {
    return cast_weight.defined() ? cast_weight : *given_weight;
  }
};

// The dtype autocast computes the convolution in, where autocast is on for
// the input's device (aten's convolutions are lower-precision ops there).
std::optional<at::ScalarType> autocast_dtype(const at::Tensor& input) {
  const c10::DeviceType device = input.device().type();
  if (!at::autocast::is_autocast_enabled(device)) return std::nullopt;
  return at::autocast::get_autocast_dtype(device);
}

// Casts the call's operands as autocast casts aten's convolution's (each
// floating operand on the device, but float64, to its dtype; the weight from
// autocast's own cache, which aten's cast then finds), so that the call is
// planned, tuned and keyed in the dtype it computes in (docs/DESIGN.md,
// "Pass-through").
void cast_as_autocast(RoutedCall& call) {
  if (!call.autocast || call.cast_input.defined()) return;
  const at::ScalarType dtype = *call.autocast;
  const c10::DeviceType device = call.input().device().type();
  call.cast_input = at::autocast::cached_cast(dtype, call.input(), device);
  call.cast_weight = at::autocast::cached_cast(dtype, call.weight(), device);
  if (call.bias) call.bias = at::autocast::cached_cast(dtype, *call.bias, device);
}

// Every field of a call that its validity and route depend on, beyond the
// thread's state that route() reads on every call. Under autocast it holds
// the autocast dtype, and the operands as given.
CallKey route_key(KeyTag tag, int spatial_dims, const RoutedCall& call) {
  CallKey key;
  key.add(static_cast<int64_t>(tag));
  key.add(spatial_dims | int64_t{call.input().requires_grad()} << 8 |
          int64_t{call.weight().requires_grad()} << 9 |
          int64_t{at::GradMode::is_enabled()} << 10 | int64_t{call.bias.has_value()} << 11 |
          (call.autocast ? static_cast<int64_t>(*call.autocast) + 1 : 0) << 12);
  key.add_operand(call.input());
  key.add_operand(call.weight());
  if (call.bias) key.add_operand(*call.bias);
  key.add_arguments(call.arguments.params(), call.arguments.output_padding);
  return key;
}

// Counts a gradient PyTorch's node computes, unless the aten scope, enabled
// too, counts it there.
void count_passed_through(Served served, bool measured) {
  if (!aten_scope_enabled()) count_served(served, Strategy::aten, measured);
}

// conv{spatial_dims}d: PyTorch's node when each gradient the call needs is
// planned for aten. A call not in this thread's cache is planned on its
// operands as autocast casts them.
Route route_convolution(RoutedCall& call, int spatial_dims) {
  const CachedPlan cached(route_key(KeyTag::functional_convolution, spatial_dims, call));
  PlanSummary plan = cached.summary();
  if (!cached.found()) {
    cast_as_autocast(call);
    const ConvParams params = call.arguments.params();
    const std::optional<ConvGeometry> geometry =
        forward_call_geometry(call.input(), call.weight(), call.bias, params, spatial_dims);
    PlanLookup lookup;
    if (geometry) {
      const BackwardCall backward = forward_backward_call(call.input(), call.weight(), params);
      lookup = resolve_plan(*geometry, &backward);
      if (lookup.pending) return Route::bwdconv;
    }
    plan = PlanSummary::of(lookup.plan.get());
    cached.keep(std::move(lookup.plan));
  }
  if (!plan.planned) return Route::original;  // invalid: the original raises
  const bool wants_input = call.input().requires_grad();
  const bool wants_weight = call.weight().requires_grad();
  if (!plan.aten_computes_all(wants_input, wants_weight)) return Route::bwdconv;
  if (wants_input) count_passed_through(Served::input, plan.input_measured);
  if (wants_weight) count_passed_through(Served::weight, plan.weight_measured);
  return Route::aten;
}

// The plans of a transposed call's forward (the matching convolution's
// input gradient) and, where wanted, weight gradient (the matching
// convolution's); null where bwdconv does not plan the call.
struct TransposedPlans {
  std::shared_ptr<const Plan> forward, weight;
  bool pending = false;
};

TransposedPlans plan_transposed(const RoutedCall& call, bool wants_weight) {
  const ConvParams params = call.arguments.params();
  const std::optional<ConvGeometry> geometry = plannable_transposed_geometry(
      call.input(), call.weight(), call.bias, params, call.arguments.output_padding);
  if (!geometry) return {};  // invalid, or an output padding bwdconv does not plan
  ConvGeometry forward_geometry = *geometry;
  forward_geometry.transposed = true;
  const BackwardCall forward_call = transposed_forward_call(call.input(), call.weight(), params);
  PlanLookup forward = resolve_plan(forward_geometry, &forward_call);
  if (forward.pending || !wants_weight) return {std::move(forward.plan), nullptr, forward.pending};
  const BackwardCall weight_call =
      backward_call(call.input(), nullptr, nullptr, false, true, params);
  PlanLookup weight = resolve_plan(*geometry, &weight_call);
  return {std::move(forward.plan), std::move(weight.plan), weight.pending};
}

// conv_transpose{spatial_dims}d: PyTorch's function when its forward and,
// if needed, its weight gradient are planned for aten; its input gradient
// is a forward convolution.
Route route_transposed(RoutedCall& call, int spatial_dims) {
  if (call.input().dim() != spatial_dims + 2) return Route::python;  // unbatched
  const bool wants_weight = at::GradMode::is_enabled() && call.weight().requires_grad();
  const CallKey key = route_key(KeyTag::functional_transposed, spatial_dims, call);
  const CachedPlan forward(key);
  std::optional<CachedPlan> weight;
  if (wants_weight) {
    CallKey weight_key = key;
    weight_key.add(static_cast<int64_t>(KeyTag::functional_transposed_weight));
    weight.emplace(weight_key);
  }
  PlanSummary forward_plan = forward.summary();
  PlanSummary weight_plan = weight ? weight->summary() : PlanSummary{};
  if (!forward.found() || (weight && !weight->found())) {
    cast_as_autocast(call);
    TransposedPlans plans = plan_transposed(call, wants_weight);
    if (plans.pending) return Route::bwdconv;
    forward_plan = PlanSummary::of(plans.forward.get());
    weight_plan = PlanSummary::of(plans.weight.get());
    forward.keep(std::move(plans.forward));
    if (weight) weight->keep(std::move(plans.weight));
  }
  if (!forward_plan.planned) return Route::original;
  if (forward_plan.input != Strategy::aten ||
      (wants_weight && weight_plan.weight != Strategy::aten)) {
    return Route::bwdconv;
  }
  count_passed_through(Served::forward, forward_plan.input_measured);
  if (wants_weight) count_passed_through(Served::weight, weight_plan.weight_measured);
  return Route::aten;
}

// Where a functional call with `signature` goes.
RoutedCall route(const Signature& signature, int spatial_dims, PyObject* args,
                 PyObject* kwargs) {
  const auto bound = bind(signature, args, kwargs);
  if (!bound) return {Route::original};
  const bool transposed = signature.output_padding.has_value();
  PyObject* bias_object = (*bound)[kBias];
  if (!planned_operands((*bound)[kInput], (*bound)[kWeight], bias_object, !transposed)) {
    return {Route::original};
  }
  RoutedCall call;
  call.given_input = &THPVariable_Unpack((*bound)[kInput]);
  call.given_weight = &THPVariable_Unpack((*bound)[kWeight]);
  if (!read_arguments(signature, *bound, spatial_dims, call.weight(), call.arguments)) {
    return {Route::python};
  }
  if (bias_object != nullptr && bias_object != Py_None) {
    call.bias = THPVariable_Unpack(bias_object);
  }
  call.autocast = autocast_dtype(call.input());
  const Route routed = transposed ? route_transposed(call, spatial_dims)
                                  : route_convolution(call, spatial_dims);
  if (routed == Route::bwdconv) cast_as_autocast(call);
  // bwdconv.convolution lays its output out from its settled operands, aten
  // from the strides given: where they differ the original keeps PyTorch's,
  // and PyTorch's node computes the gradients (counted as aten's).
  if (routed == Route::bwdconv && !transposed &&
      (settling_restrides(call.input()) || settling_restrides(call.weight()))) {
    if (call.input().requires_grad()) count_passed_through(Served::input, false);
    if (call.weight().requires_grad()) count_passed_through(Served::weight, false);
    return {Route::original};
  }
  const bool python_only = routed == Route::bwdconv &&
                           (call.input().dim() != spatial_dims + 2 ||  // unbatched
                            at::impl::torch_function_mode_enabled());
  call.route = python_only ? Route::python : routed;
  return call;
}

// bwdconv's op for a call routed to it, without the GIL (as torch.ops
// releases it; the tuning hook takes it back). The operands are held here
// first, as torch.ops holds its arguments, so that another thread cannot
// free them meanwhile.
at::Tensor call_op(bool transposed, const RoutedCall& call) {
  const Arguments& a = call.arguments;
  const at::Tensor input = call.input(), weight = call.weight();
  pybind11::gil_scoped_release no_gil;
  if (!transposed) {
    return call_convolution(input, weight, call.bias, a.stride, a.padding, a.dilation,
                            a.groups);
  }
  return call_conv_transpose(input, weight, call.bias, a.stride, a.padding, a.output_padding,
                             a.groups, a.dilation);
}

bool checked_call_arguments(PyObject* const* args, Py_ssize_t nargs) {
  if (nargs == 3 && PyLong_Check(args[0]) && PyTuple_Check(args[1])) return true;
  PyErr_SetString(PyExc_TypeError, "expected (spatial_dims, args: tuple, kwargs: dict | None)");
  return false;
}

// The route of a call, or nothing with the Python error set (raised by the
// tuning hook: KeyboardInterrupt...). Strict forcing that cannot serve
// raises here too: bwdconv's Python wrapper takes that call, and the op
// raises it in backward.
std::optional<RoutedCall> routed(const Signature& signature, PyObject* const* args) {
  try {
    return route(signature, static_cast<int>(PyLong_AsLong(args[0])), args[1], args[2]);
  } catch (pybind11::error_already_set& error) {
    error.restore();
    return std::nullopt;
  } catch (const c10::Error&) {
    RoutedCall python_path;
    python_path.route = Route::python;
    return python_path;
  }
}

// (spatial_dims, args, kwargs) -> None | NotImplemented | Tensor, for the
// functions of `signature` (functional_route.h). It runs in torch's Python
// error handling, as torch's own bindings do: a warning raised in C++
// (aten's, or the tuning hook's) reaches Python's warnings as the caller's,
// and an exception it does not handle becomes its Python exception.
template <const Signature& kSignature>
PyObject* call(PyObject* /*module*/, PyObject* const* args, Py_ssize_t nargs) {
  HANDLE_TH_ERRORS
  if (!checked_call_arguments(args, nargs)) return nullptr;
  const auto call = routed(kSignature, args);
  if (!call) return nullptr;
  switch (call->route) {
    case Route::original:
    case Route::aten:
      Py_RETURN_NONE;
    case Route::python:
      Py_RETURN_NOTIMPLEMENTED;
    case Route::bwdconv:
      break;
  }
  try {
    return THPVariable_Wrap(call_op(kSignature.output_padding.has_value(), *call));
  } catch (pybind11::error_already_set& error) {
    error.restore();  // raised by the tuning hook (KeyboardInterrupt...)
    return nullptr;
  } catch (const c10::Error&) {
    Py_RETURN_NONE;  // an invalid call: the original raises PyTorch's own error
  }
  END_HANDLE_TH_ERRORS
}

}  // namespace

PyMethodDef functional_route_methods[] = {
    {"functional_call", reinterpret_cast<PyCFunction>(call<kConvolution>), METH_FASTCALL,
     "functional_call(spatial_dims, args, kwargs) -> None | NotImplemented | Tensor: the call "
     "of conv{spatial_dims}d routed: None, to the function bwdconv replaced; NotImplemented, "
     "to bwdconv's Python wrapper; else bwdconv's op's result."},
    {"transposed_call", reinterpret_cast<PyCFunction>(call<kTransposed>), METH_FASTCALL,
     "transposed_call(spatial_dims, args, kwargs): the same for conv_transpose{spatial_dims}d."},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace bwdconv::ops
