#include "ops/functional_route.h"

#include <ATen/core/grad_mode.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <pybind11/pybind11.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/jit/frontend/tracer.h>

#include <array>
#include <optional>
#include <vector>

#include "ops/aten_scope.h"
#include "ops/backward.h"
#include "ops/decisions.h"
#include "ops/geometry.h"

namespace bwdconv::ops {
namespace {

// torch.nn.functional.conv{1,2,3}d(input, weight, bias, stride, padding, dilation, groups).
constexpr std::array<const char*, 7> kConvolutionArguments = {
    "input", "weight", "bias", "stride", "padding", "dilation", "groups"};
enum Argument { kInput, kWeight, kBias, kStride, kPadding, kDilation, kGroups };
using BoundArguments = std::array<PyObject*, kConvolutionArguments.size()>;

// The arguments by position in the signature (nullptr: not given), or nothing
// when they do not bind: the original function raises PyTorch's TypeError.
std::optional<BoundArguments> bind(PyObject* args, PyObject* kwargs) {
  BoundArguments bound{};
  const Py_ssize_t positional = PyTuple_GET_SIZE(args);
  if (positional > static_cast<Py_ssize_t>(bound.size())) return std::nullopt;
  for (Py_ssize_t i = 0; i < positional; ++i) bound[i] = PyTuple_GET_ITEM(args, i);
  if (kwargs == nullptr || kwargs == Py_None) return bound;
  Py_ssize_t position = 0;
  PyObject *name, *value;
  while (PyDict_Next(kwargs, &position, &name, &value)) {
    size_t index = 0;
    while (index < bound.size() &&
           PyUnicode_CompareWithASCIIString(name, kConvolutionArguments[index]) != 0) {
      ++index;
    }
    if (index == bound.size() || bound[index] != nullptr) return std::nullopt;
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
  PyObject* get() const { return PyDict_GetItem(dict_, name_); }  // borrowed; may be null

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
// dtype on the CPU or a GPU, zero-size ones, no gradient needed, a torch.func
// transform, forward-mode AD, torch.export or torch.jit tracing.
bool planned_operands(PyObject* input, PyObject* weight, PyObject* bias) {
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
  if (!at::GradMode::is_enabled() || !(x.requires_grad() || w.requires_grad())) return false;
  return !inside_functorch_transform() && !forward_ad_level_open() &&
         !exporting() && !torch::jit::tracer::isTracing();
}

using Values = std::vector<int64_t>;

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

// An int or a sequence of ints, one per spatial dim or one for all, as
// bwdconv.functional's expand reads it; nothing for anything else.
std::optional<Values> per_dim_values(PyObject* value, int spatial_dims, int64_t default_value) {
  if (value == nullptr) return Values(spatial_dims, default_value);
  if (PyLong_CheckExact(value)) {
    const auto single = exact_int(value);
    if (!single) return std::nullopt;
    return Values(spatial_dims, *single);
  }
  if (!PyTuple_Check(value) && !PyList_Check(value)) return std::nullopt;
  const Py_ssize_t length = PySequence_Fast_GET_SIZE(value);
  if (length != 1 && length != spatial_dims) return std::nullopt;
  PyObject** items = PySequence_Fast_ITEMS(value);
  Values values;
  for (int i = 0; i < spatial_dims; ++i) {
    const auto item = exact_int(items[length == 1 ? 0 : i]);
    if (!item) return std::nullopt;
    values.push_back(*item);
  }
  return values;
}

// The padding of a string padding: "valid" is none, "same" (stride 1 only)
// is the left half of the dilated filter's extent on both sides, as
// bwdconv.functional pads it when the extent is even; nothing for the rest
// (the Python wrapper pads odd extents itself, or raises PyTorch's error).
std::optional<Values> string_padding(PyObject* padding, const Values& stride,
                                     const Values& dilation, const at::Tensor& weight) {
  const int n = static_cast<int>(stride.size());
  if (PyUnicode_CompareWithASCIIString(padding, "valid") == 0) return Values(n, 0);
  if (PyUnicode_CompareWithASCIIString(padding, "same") != 0) return std::nullopt;
  Values left;
  for (int i = 0; i < n; ++i) {
    const int64_t extent = dilation[i] * (weight.size(i + 2) - 1);
    if (stride[i] != 1 || extent % 2 != 0) return std::nullopt;
    left.push_back(extent / 2);
  }
  return left;
}

// The convolution's arguments (stride, padding, dilation, groups), or nothing
// when they are not plain ints bwdconv.functional would read the same way.
struct Arguments {
  Values stride, padding, dilation;
  int64_t groups = 1;
};

std::optional<Arguments> read_arguments(const BoundArguments& bound, int spatial_dims,
                                        const at::Tensor& weight) {
  Arguments a;
  auto stride = per_dim_values(bound[kStride], spatial_dims, 1);
  auto dilation = per_dim_values(bound[kDilation], spatial_dims, 1);
  if (!stride || !dilation || weight.dim() != spatial_dims + 2) return std::nullopt;
  std::optional<Values> padding =
      bound[kPadding] != nullptr && PyUnicode_Check(bound[kPadding])
          ? string_padding(bound[kPadding], *stride, *dilation, weight)
          : per_dim_values(bound[kPadding], spatial_dims, 0);
  if (!padding) return std::nullopt;
  if (bound[kGroups] != nullptr) {
    const auto groups = exact_int(bound[kGroups]);
    if (!groups) return std::nullopt;
    a.groups = *groups;
  }
  a.stride = std::move(*stride);
  a.padding = std::move(*padding);
  a.dilation = std::move(*dilation);
  return a;
}

enum class Route { original, bwdconv };

// Where the functional call of conv{spatial_dims}d goes.
Route route_convolution(int spatial_dims, PyObject* args, PyObject* kwargs) {
  const auto bound = bind(args, kwargs);
  if (!bound) return Route::original;
  PyObject* bias_object = (*bound)[kBias];
  if (!planned_operands((*bound)[kInput], (*bound)[kWeight], bias_object)) return Route::original;
  const at::Tensor& input = THPVariable_Unpack((*bound)[kInput]);
  const at::Tensor& weight = THPVariable_Unpack((*bound)[kWeight]);
  const auto arguments = read_arguments(*bound, spatial_dims, weight);
  if (!arguments) return Route::bwdconv;
  const std::optional<at::Tensor> bias =
      bias_object == nullptr || bias_object == Py_None
          ? std::nullopt
          : std::optional<at::Tensor>(THPVariable_Unpack(bias_object));
  const ConvParams params{arguments->stride, arguments->padding, arguments->dilation,
                          arguments->groups};
  const std::optional<ConvGeometry> geometry =
      forward_call_geometry(input, weight, bias, params, spatial_dims);
  if (!geometry) return Route::original;  // invalid: the original raises
  const BackwardCall call = forward_backward_call(input, weight, params);
  const std::shared_ptr<const Plan> plan = aten_only_plan(*geometry, call);
  if (!plan) return Route::bwdconv;
  // PyTorch's node computes them; the aten scope counts them itself.
  if (!aten_scope_enabled()) {
    if (call.wants_input) count_served(Gradient::input, plan->input);
    if (call.wants_weight) count_served(Gradient::weight, plan->weight);
  }
  return Route::original;
}

PyObject* functional_passes_through(PyObject* /*module*/, PyObject* const* args,
                                    Py_ssize_t nargs) {
  if (nargs != 3 || !PyLong_Check(args[0]) || !PyTuple_Check(args[1])) {
    PyErr_SetString(PyExc_TypeError,
                    "functional_passes_through(spatial_dims, args: tuple, kwargs: dict | None)");
    return nullptr;
  }
  const long spatial_dims = PyLong_AsLong(args[0]);
  try {
    const Route route = route_convolution(static_cast<int>(spatial_dims), args[1], args[2]);
    return PyBool_FromLong(route == Route::original);
  } catch (pybind11::error_already_set& error) {
    error.restore();  // raised by the tuning hook (KeyboardInterrupt...)
    return nullptr;
  } catch (const c10::Error&) {
    // Strict forcing that cannot serve: bwdconv's op raises it in backward.
    return PyBool_FromLong(0);
  }
}

}  // namespace

PyMethodDef functional_route_methods[] = {
    {"functional_passes_through", reinterpret_cast<PyCFunction>(functional_passes_through),
     METH_FASTCALL,
     "functional_passes_through(spatial_dims, args, kwargs) -> bool: whether the functional "
     "call goes to the function bwdconv replaced (docs/DESIGN.md, \"Pass-through\")."},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace bwdconv::ops
