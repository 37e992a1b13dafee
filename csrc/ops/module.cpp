// The Python module bwdconv._C: loading it registers the operator library;
// its functions switch the aten scope, force strategies and explain plans.
#include "ops/precompiled.h"  // first, as the precompiled header must be

#include <torch/csrc/utils/pybind.h>

#include <pybind11/stl.h>

#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "dispatch/plan.h"
#include "hip/host_grid.h"
#include "ops/aten_scope.h"
#include "ops/backward.h"
#include "ops/plans.h"
#include "ops/functional_route.h"
#include "ops/geometry.h"
#include "ops/kernels.h"
#include "ops/memory.h"
#include "ops/tuning_bindings.h"
#include "ops/filter.h"

namespace bwdconv::ops {

Strategy strategy_named(const std::string& name) {
  const auto strategy = parse_strategy(name);
  if (!strategy) {
    throw pybind11::value_error("unknown strategy '" + name +
                                "'; known strategies: " + known_strategy_names());
  }
  return *strategy;
}

Swap1x1Writer swap1x1_writer_named(const std::string& name) {
  const auto writer = parse_swap1x1_writer(name);
  if (!writer) {
    throw pybind11::value_error("unknown swap1x1 writer '" + name +
                                "'; known: " + known_swap1x1_writer_names());
  }
  return *writer;
}

namespace {

// Both names are checked before either takes effect.
void set_forcing_by_name(const std::optional<std::string>& strategy,
                         const std::optional<std::string>& swap1x1_writer, bool strict) {
  Forcing forcing;
  if (strategy) forcing.strategy = strategy_named(*strategy);
  if (swap1x1_writer) forcing.swap1x1_writer = swap1x1_writer_named(*swap1x1_writer);
  forcing.strict = strict;
  set_forcing(forcing);
}

// (strategy, swap1x1 writer, strict)
std::tuple<std::optional<std::string>, std::optional<std::string>, bool> forcing_names() {
  const Forcing forcing = current_forcing();
  std::tuple<std::optional<std::string>, std::optional<std::string>, bool> names;
  if (forcing.strategy) std::get<0>(names) = strategy_name(*forcing.strategy);
  if (forcing.swap1x1_writer) std::get<1>(names) = swap1x1_writer_name(*forcing.swap1x1_writer);
  std::get<2>(names) = forcing.strict;
  return names;
}

// Why strict forcing cannot serve the geometry (backward would raise this),
// or nothing when it can or forcing is not strict.
std::optional<std::string> strict_forcing_refusal(const ConvGeometry& g, const Forcing& forcing) {
  if (!forcing.strict) return std::nullopt;
  try {
    make_plan(g, forcing.strategy, forcing.swap1x1_writer, /*strict=*/true);
  } catch (const std::invalid_argument& error) {
    return std::string(error.what());
  }
  return std::nullopt;
}

DType dtype_named(const std::string& name) {
  for (DType dtype : {DType::Float64, DType::Float32, DType::Float16, DType::BFloat16}) {
    if (name == dtype_name(dtype)) return dtype;
  }
  return DType::Other;
}

DeviceKind device_named(const std::string& name) {
  for (DeviceKind device : {DeviceKind::CPU, DeviceKind::CUDA, DeviceKind::HIP}) {
    if (name == device_name(device)) return device;
  }
  throw pybind11::value_error("unknown device kind '" + name + "'; expected cpu, cuda or hip");
}

pybind11::list spatial_list(const SpatialSizes& sizes, int spatial_dims) {
  pybind11::list values;
  for (int i = 0; i < spatial_dims; ++i) values.append(sizes[i]);
  return values;
}

pybind11::dict gradient_dict(const GradientPlan& plan) {
  pybind11::dict entry;
  entry["strategy"] = strategy_name(plan.strategy);
  entry["reason"] = plan.reason;
  entry["measured"] = plan.measured;
  pybind11::list candidates;
  for (const Candidate& c : plan.candidates) {
    pybind11::dict candidate;
    candidate["strategy"] = strategy_name(c.strategy);
    candidate["serves"] = c.serves;
    candidate["reason"] = candidate_reason(plan, c);
    candidates.append(candidate);
  }
  entry["candidates"] = candidates;
  return entry;
}

// One list per field, one value per spatial dim.
template <typename Dim, typename Field>
pybind11::list per_dim(const Dim* dims, int spatial_dims, Field field) {
  pybind11::list values;
  for (int i = 0; i < spatial_dims; ++i) values.append(field(dims[i]));
  return values;
}

pybind11::list phases_list(const Plan& plan) {
  const int n = plan.geometry.spatial_dims;
  pybind11::list phases;
  for (const Phase& phase : plan.phases) {
    const PhaseDim* d = phase.dims.data();
    pybind11::dict entry;
    entry["residue"] = per_dim(d, n, [](const PhaseDim& p) { return p.residue; });
    entry["taps"] = per_dim(d, n, [](const PhaseDim& p) { return p.tap_count; });
    entry["empty"] = phase.empty();
    entry["first_tap"] = per_dim(d, n, [](const PhaseDim& p) { return p.first_tap; });
    entry["tap_step"] = per_dim(d, n, [](const PhaseDim& p) { return p.tap_step; });
    entry["sub_dilation"] = per_dim(d, n, [](const PhaseDim& p) { return p.sub_dilation; });
    entry["conv_padding"] = per_dim(d, n, [](const PhaseDim& p) { return p.conv_padding; });
    entry["slots"] = per_dim(d, n, [](const PhaseDim& p) { return p.slots(); });
    entry["computed"] = per_dim(d, n, [](const PhaseDim& p) { return p.computed(); });
    entry["dst_offset"] = per_dim(d, n, [](const PhaseDim& p) { return p.dst_offset; });
    entry["dst_stride"] = per_dim(d, n, [](const PhaseDim& p) { return p.dst_stride; });
    phases.append(entry);
  }
  return phases;
}

pybind11::dict scatter_dict(const Plan& plan) {
  const int n = plan.geometry.spatial_dims;
  const ScatterDim* d = plan.scatter.dims.data();
  pybind11::dict entry;
  entry["lead"] = per_dim(d, n, [](const ScatterDim& s) { return s.lead; });
  entry["trail"] = per_dim(d, n, [](const ScatterDim& s) { return s.trail; });
  entry["output_padding"] = per_dim(d, n, [](const ScatterDim& s) { return s.output_padding; });
  entry["buffer"] = per_dim(d, n, [](const ScatterDim& s) { return s.buffer; });
  return entry;
}

pybind11::dict stacked_dict(const Plan& plan) {
  const int n = plan.geometry.spatial_dims;
  const StackedDim* d = plan.stacked.dims.data();
  pybind11::dict entry;
  entry["phases"] = plan.stacked.stacked_phases.size();
  entry["padding"] = per_dim(d, n, [](const StackedDim& s) { return s.padding; });
  entry["filter"] = per_dim(d, n, [](const StackedDim& s) { return s.filter; });
  entry["sub_dilation"] = per_dim(d, n, [](const StackedDim& s) { return s.sub_dilation; });
  entry["rows"] = per_dim(d, n, [](const StackedDim& s) { return s.rows; });
  return entry;
}

// The plan of the convolution with these operand sizes, as a dict.
pybind11::dict plan_dict(const std::vector<int64_t>& input_size,
                         const std::vector<int64_t>& weight_size,
                         const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                         const std::vector<int64_t>& dilation, int64_t groups,
                         const std::string& dtype, bool channels_last,
                         const std::string& device, bool weight_channels_last,
                         int64_t device_index, bool transposed, bool training,
                         bool wants_input, bool wants_weight) {
  const size_t rank = input_size.size();
  if (rank < 3 || rank > 5 || weight_size.size() != rank || stride.size() != rank - 2 ||
      padding.size() != rank - 2 || dilation.size() != rank - 2) {
    throw pybind11::value_error(
        "expected input and weight sizes of equal rank 3-5 and one stride, padding and "
        "dilation value per spatial dim");
  }
  ConvGeometry g = sizes_geometry(input_size, weight_size, {stride, padding, dilation, groups});
  g.dtype = dtype_named(dtype);
  g.layout = channels_last ? MemoryLayout::ChannelsLast : MemoryLayout::Contiguous;
  g.device = device_named(device);
  g.transposed = transposed;
  derive_output_sizes(g);
  if (auto error = find_geometry_error(g)) throw pybind11::value_error(*error);
  // The gradients the backward computes, as a training step plans them: a
  // measured decision for that call shows, when there is one. A transposed
  // convolution's forward is the input gradient alone, keyed apart, in
  // training (autograd records it) apart from inference; its weight gradient
  // is the matching convolution's, keyed as its backward plans it
  // (functional_route.cpp, plan_transposed).
  BackwardCall call;
  call.wants_input = transposed || wants_input;
  call.wants_weight = !transposed && wants_weight;
  if (call.wants_input) {  // only the input gradient reads the weight's layout
    call.weight_layout =
        weight_channels_last ? MemoryLayout::ChannelsLast : MemoryLayout::Contiguous;
  }
  call.device_index = device_index;
  call.records_autograd = transposed && training;
  // Explains under strict forcing too: the plan as if not strict, and why
  // backward would raise.
  Forcing forcing = current_forcing();
  const std::optional<std::string> strict_refusal = strict_forcing_refusal(g, forcing);
  forcing.strict = false;
  const std::shared_ptr<const Plan> shared = resolve_plan(g, &call, forcing).plan;
  const Plan& plan = *shared;
  std::shared_ptr<const Plan> weight_plan = shared;
  if (transposed) {
    ConvGeometry matching = g;
    matching.transposed = false;
    BackwardCall weight_call;
    weight_call.wants_input = false;
    weight_call.wants_weight = true;
    weight_call.device_index = device_index;
    weight_plan = resolve_plan(matching, &weight_call, forcing).plan;
  }

  pybind11::dict result;
  result["spatial_dims"] = g.spatial_dims;
  result["output_size"] = spatial_list(g.output, g.spatial_dims);
  result["dtype"] = dtype_name(g.dtype);
  result["layout"] = layout_name(g.layout);
  result["device"] = device_name(g.device);
  result["input"] = gradient_dict(plan.input);
  result["weight"] = gradient_dict(weight_plan->weight);
  result["strict_forcing_refusal"] =
      strict_refusal ? pybind11::cast(*strict_refusal) : pybind11::none();
  result["phases"] = phases_list(plan);
  result["scatter"] = scatter_dict(plan);
  if (!plan.stacked.stacked_phases.empty()) result["phase_stacked"] = stacked_dict(plan);
  pybind11::dict splitk;
  splitk["batch_chunks"] = plan.splitk.batch_chunks;
  splitk["space_chunks"] = plan.splitk.space_chunks;
  result["splitk"] = splitk;
  if (plan.swap1x1) {
    pybind11::dict writer;
    writer["writer"] = swap1x1_writer_name(plan.swap1x1->writer);
    writer["reason"] = plan.swap1x1->reason;
    pybind11::dict refusals;  // every writer: why it cannot serve, or None
    for (const Swap1x1Writer w : kSwap1x1Writers) {
      const std::optional<std::string> why = writer_refusal(w, g);
      refusals[swap1x1_writer_name(w)] = why ? pybind11::cast(*why) : pybind11::none();
    }
    writer["refusals"] = refusals;
    pybind11::list timed;  // the writers the tuner and the bench time (timed_writers)
    for (const Swap1x1Writer w : timed_writers(g)) timed.append(swap1x1_writer_name(w));
    writer["timed"] = timed;
    result["swap1x1"] = writer;
  }
  return result;
}

// The strategy registry, one dict per entry in registry order:
// {"name", "gradients": ["input", ...], "deterministic": {"cpu": bool, "gpu": bool},
//  "kernel": name or None}.
pybind11::list strategy_registry() {
  pybind11::list entries;
  for (const StrategyEntry& e : kStrategies) {
    pybind11::list gradients;
    for (Gradient gradient : {Gradient::input, Gradient::weight}) {
      if (computes(e.strategy, gradient)) gradients.append(gradient_name(gradient));
    }
    pybind11::dict deterministic;
    deterministic["cpu"] = e.deterministic.cpu;
    deterministic["gpu"] = e.deterministic.gpu;
    pybind11::dict entry;
    entry["name"] = e.name;
    entry["gradients"] = gradients;
    entry["deterministic"] = deterministic;
    entry["kernel"] = e.kernel ? pybind11::cast(std::string(e.kernel)) : pybind11::none();
    entries.append(entry);
  }
  return entries;
}

pybind11::dict traffic_dict(const hip::host::Traffic& t) {
  pybind11::dict result;
  result["accesses"] = t.accesses;
  result["bytes"] = t.bytes;
  result["distinct_bytes"] = t.distinct_bytes;
  for (const auto& [name, c] : {std::pair{"warp", t.warp}, {"wavefront", t.wavefront}}) {
    pybind11::dict group;
    group["requests"] = c.requests;
    group["sectors"] = c.sectors;
    group["min_sectors"] = c.min_sectors;
    result[name] = group;
  }
  return result;
}

// What the host-grid launches since start_kernel_recording accessed.
pybind11::dict stop_kernel_recording() {
  const hip::host::Recording recording = hip::host::stop_recording();
  pybind11::list launches;
  for (const hip::host::LaunchRecord& launch : recording.launches) {
    pybind11::dict entry;
    entry["kernel"] = launch.kernel;
    entry["blocks"] = launch.blocks;
    entry["lanes_per_block"] = launch.lanes_per_block;
    entry["load"] = traffic_dict(launch.load);
    entry["store"] = traffic_dict(launch.store);
    launches.append(entry);
  }
  pybind11::dict result;
  result["launches"] = launches;
  result["distinct_load_bytes"] = recording.distinct_load_bytes;
  result["distinct_store_bytes"] = recording.distinct_store_bytes;
  return result;
}

// Every swap1x1 writer's name, in kSwap1x1Writers' order.
pybind11::list swap1x1_writer_names() {
  pybind11::list names;
  for (const Swap1x1Writer w : kSwap1x1Writers) names.append(swap1x1_writer_name(w));
  return names;
}

// {"input": {"aten": n, ...}, "weight": {...}, "forward": {...}};
// `measured_only`: only those a measured decision chose.
pybind11::dict served_counts(bool measured_only) {
  pybind11::dict counts;
  for (Served served : {Served::input, Served::weight, Served::forward}) {
    pybind11::dict per_strategy;
    for (Strategy strategy : all_strategies()) {
      per_strategy[strategy_name(strategy)] = served_count(served, strategy, measured_only);
    }
    counts[served_name(served)] = per_strategy;
  }
  return counts;
}

}  // namespace
}  // namespace bwdconv::ops

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  using namespace bwdconv::ops;
  m.doc() = "bwdconv: planned convolution backward";
  m.def("enable_aten_scope", &enable_aten_scope);
  m.def("disable_aten_scope", &disable_aten_scope);
  m.def("aten_scope_enabled", &aten_scope_enabled);
  m.def("set_forcing", &set_forcing_by_name, pybind11::arg("strategy"),
        pybind11::arg("swap1x1_writer"), pybind11::arg("strict") = false);
  m.def("forcing", &forcing_names);
  m.def("settling_restrides", &settling_restrides, pybind11::arg("tensor"));
  m.def(
      "computes_channels_last",
      [](const at::Tensor& input, const at::Tensor& weight) {
        return gradient_memory_format(input, weight) != at::MemoryFormat::Contiguous;
      },
      pybind11::arg("input"), pybind11::arg("weight"));
  m.def("strategy_registry", &strategy_registry);
  m.def("swap1x1_writers", &swap1x1_writer_names);
  m.def("kernels_on_host", &kernels_on_host);
  m.def("set_kernels_on_host", &set_kernels_on_host, pybind11::arg("on_host"));
  m.def("start_kernel_recording", &bwdconv::hip::host::start_recording);
  m.def("stop_kernel_recording", &stop_kernel_recording);
  m.def("served_counts", &served_counts, pybind11::arg("measured_only") = false);
  m.def("reset_served_counts", &reset_served_counts);
  m.def("plan", &plan_dict, pybind11::arg("input_size"), pybind11::arg("weight_size"),
        pybind11::arg("stride"), pybind11::arg("padding"), pybind11::arg("dilation"),
        pybind11::arg("groups"), pybind11::arg("dtype"), pybind11::arg("channels_last"),
        pybind11::arg("device"), pybind11::arg("weight_channels_last") = false,
        pybind11::arg("device_index") = -1, pybind11::arg("transposed") = false,
        pybind11::arg("training") = false, pybind11::arg("wants_input") = true,
        pybind11::arg("wants_weight") = true);
  m.def("enter_weight_cache", &enter_weight_cache);
  m.def("exit_weight_cache", &exit_weight_cache);
  m.def("weight_cache_counts", [] {
    const WeightCacheCounts counts = weight_cache_counts();
    return std::make_tuple(counts.hits, counts.builds, counts.entries);
  });
  register_tuning_bindings(m);
  register_testing_bindings(m);
  register_memory_bindings(m);
  if (PyModule_AddFunctions(m.ptr(), functional_route_methods) != 0) {
    throw pybind11::error_already_set();
  }
#ifdef BWDCONV_WITH_GPU_KERNELS
  m.attr("gpu_kernels") = true;
#else
  m.attr("gpu_kernels") = false;
#endif
}
