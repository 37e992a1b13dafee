#include "ops/precompiled.h"  // first, as the precompiled header must be

#include "ops/tuning_bindings.h"

#include <ATen/Context.h>
#include <torch/csrc/utils/pybind.h>
#include <pybind11/stl.h>

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "dispatch/plan.h"
#include "ops/backward.h"
#include "ops/plans.h"

namespace bwdconv::ops {
namespace {

namespace py = pybind11;

std::optional<Swap1x1Writer> writer_or_raise(const std::optional<std::string>& name) {
  if (!name) return std::nullopt;
  return swap1x1_writer_named(*name);
}

py::list sizes_list(const SpatialSizes& sizes, int spatial_dims) {
  py::list values;
  for (int i = 0; i < spatial_dims; ++i) values.append(sizes[i]);
  return values;
}

py::object tensor_or_none(const at::Tensor* t) { return t ? py::cast(*t) : py::none(); }

// [[strategy, writer or None], ...]: every candidate that can serve
// `gradient`, swap1x1 once per writer worth timing (timed_writers),
// restricted to strategies deterministic on the device when PyTorch asks for
// determinism.
py::list candidates(const Plan& rules, Gradient gradient) {
  const bool deterministic_only = at::globalContext().deterministicAlgorithms();
  py::list list;
  for (const Candidate& c : rules.of(gradient).candidates) {
    if (!c.serves) continue;
    if (deterministic_only && !deterministic_on(c.strategy, rules.geometry.device)) continue;
    if (c.strategy == Strategy::swap1x1 && rules.swap1x1) {
      for (const Swap1x1Writer writer : timed_writers(rules.geometry)) {
        list.append(py::make_tuple(strategy_name(c.strategy), swap1x1_writer_name(writer)));
      }
    } else {
      list.append(py::make_tuple(strategy_name(c.strategy), py::none()));
    }
  }
  return list;
}

// What the Python tuner is told about a call.
py::dict request(const ConvGeometry& g, const BackwardCall& call, const Plan& rules) {
  const int n = g.spatial_dims;
  py::dict r;
  r["input_size"] = input_sizes(g);
  r["weight_size"] = weight_sizes(g);
  r["stride"] = sizes_list(g.stride, n);
  r["padding"] = sizes_list(g.padding, n);
  r["dilation"] = sizes_list(g.dilation, n);
  r["groups"] = g.groups;
  r["dtype"] = dtype_name(g.dtype);
  r["layout"] = layout_name(g.layout);
  r["weight_layout"] = call.weight_layout ? py::cast(layout_name(*call.weight_layout)) : py::none();
  r["device"] = device_name(g.device);
  r["device_index"] = call.device_index;
  r["wants_input"] = call.wants_input;
  r["wants_weight"] = call.wants_weight;
  r["transposed"] = g.transposed;
  r["records_autograd"] = call.records_autograd;
  r["grad_output"] = tensor_or_none(call.grad_output);
  r["input"] = tensor_or_none(call.input);
  r["weight"] = tensor_or_none(call.weight);
  py::dict cands, rule;
  for (Gradient gradient : {Gradient::input, Gradient::weight}) {
    cands[gradient_name(gradient)] = candidates(rules, gradient);
    rule[gradient_name(gradient)] = strategy_name(rules.of(gradient).strategy);
  }
  r["candidates"] = cands;
  r["rules"] = rule;
  return r;
}

std::optional<GradientDecision> gradient_decision(const py::dict& answer, const char* gradient) {
  if (!answer.contains(gradient) || answer[gradient].is_none()) return std::nullopt;
  auto entry = answer[gradient].cast<std::tuple<std::string, std::optional<std::string>, std::string>>();
  return GradientDecision{strategy_named(std::get<0>(entry)), writer_or_raise(std::get<1>(entry)),
                          std::get<2>(entry)};
}

// None: ask again; "rules": the rules decide; {"input": (strategy, writer,
// reason) or None, "weight": ...}: a decision.
HookAnswer parse_answer(const py::object& answer) {
  HookAnswer parsed;
  if (answer.is_none()) return parsed;
  if (py::isinstance<py::str>(answer)) {
    parsed.kind = HookAnswer::rules;
    return parsed;
  }
  const py::dict decision = answer.cast<py::dict>();
  parsed.kind = HookAnswer::decided;
  parsed.decision.input = gradient_decision(decision, "input");
  parsed.decision.weight = gradient_decision(decision, "weight");
  return parsed;
}

// The Python callable, kept alive (and never destroyed at exit, when the
// interpreter may be gone).
py::object* python_hook = new py::object();

HookAnswer call_python_hook(const ConvGeometry& g, const BackwardCall& call, const Plan& rules) {
  if (!Py_IsInitialized()) return {};
  py::gil_scoped_acquire gil;
  if (!*python_hook || python_hook->is_none()) return {};
  try {
    return parse_answer((*python_hook)(request(g, call, rules)));
  } catch (py::error_already_set& error) {
    if (error.matches(PyExc_KeyboardInterrupt)) throw;
    TORCH_WARN("bwdconv: the autotuner failed (", error.what(),
               "); the rules decide this shape in this process");
    HookAnswer rules_decide;
    rules_decide.kind = HookAnswer::rules;
    return rules_decide;
  }
}

void publish_hook_shortcut(
    std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> cached_sizes,
    HookShortcut::Environment environment) {
  set_hook_shortcut({std::move(cached_sizes), std::move(environment)});
}

void set_python_hook(py::object hook) {
  *python_hook = hook;
  if (hook.is_none()) {
    py::gil_scoped_release release;  // a tuning thread may wait for the GIL
    set_tuning_hook(nullptr);
  } else {
    set_tuning_hook(call_python_hook);
  }
}

// Computes one gradient with an explicit strategy (and swap1x1 writer),
// without touching the process-wide forcing: how the tuner times and checks a
// candidate. `operand` is the weight for the input gradient, the input for
// the weight gradient; `sizes` the sizes of the gradient.
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

// Both gradients as a decision would compute them (one aten call when both
// are aten): how the tuner compares a pair of per-gradient winners with
// aten's single call for both.
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

at::Tensor gradient_by_name(const std::string& gradient, const std::string& strategy,
                            const std::optional<std::string>& writer, const at::Tensor& grad_output,
                            const at::Tensor& operand, const std::vector<int64_t>& sizes,
                            const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                            const std::vector<int64_t>& dilation, int64_t groups) {
  if (gradient != "input" && gradient != "weight") {
    throw py::value_error("gradient must be 'input' or 'weight', got '" + gradient + "'");
  }
  const Strategy s = strategy_named(strategy);
  const auto w = writer_or_raise(writer);
  py::gil_scoped_release release;
  return gradient_with(gradient == "input" ? Gradient::input : Gradient::weight, s, w,
                       grad_output, operand, sizes, {stride, padding, dilation, groups});
}

std::pair<at::Tensor, at::Tensor> gradients_by_name(
    const std::string& input_strategy, const std::optional<std::string>& writer,
    const std::string& weight_strategy, const at::Tensor& grad_output, const at::Tensor& input,
    const at::Tensor& weight, const std::vector<int64_t>& stride,
    const std::vector<int64_t>& padding, const std::vector<int64_t>& dilation, int64_t groups) {
  Decision decision;
  decision.input = GradientDecision{strategy_named(input_strategy), writer_or_raise(writer), ""};
  decision.weight = GradientDecision{strategy_named(weight_strategy), std::nullopt, ""};
  py::gil_scoped_release release;
  return gradients_with(decision, grad_output, input, weight, {stride, padding, dilation, groups});
}

}  // namespace

void register_tuning_bindings(py::module& m) {
  m.def("set_tuning_hook", &set_python_hook, py::arg("hook"));
  m.def("forget_decisions", &forget_decisions);
  m.def("set_hook_shortcut", &publish_hook_shortcut, py::arg("cached_sizes"),
        py::arg("environment"));
  m.def("has_hook_shortcut", &has_hook_shortcut);
  m.def("use_decisions", &use_decisions, py::arg("use"));
  m.def("mark_thread_as_tuning", &mark_thread_as_tuning, py::arg("tuning"));
  m.def("tuning_on_this_thread", &tuning_on_this_thread);
  m.def("gradient_with", &gradient_by_name, py::arg("gradient"), py::arg("strategy"),
        py::arg("swap1x1_writer"), py::arg("grad_output"), py::arg("operand"), py::arg("sizes"),
        py::arg("stride"), py::arg("padding"), py::arg("dilation"), py::arg("groups"));
  m.def("gradients_with", &gradients_by_name, py::arg("input_strategy"),
        py::arg("swap1x1_writer"), py::arg("weight_strategy"), py::arg("grad_output"),
        py::arg("input"), py::arg("weight"), py::arg("stride"), py::arg("padding"),
        py::arg("dilation"), py::arg("groups"));
}

}  // namespace bwdconv::ops
