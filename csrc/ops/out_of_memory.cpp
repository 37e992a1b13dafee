#include "ops/precompiled.h"  // first, as the precompiled header must be

#include "ops/out_of_memory.h"

#include <c10/util/Exception.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include "ops/backward.h"
#include "ops/route_cache.h"

namespace bwdconv::ops {
namespace {

std::atomic<uint32_t> injected_strategies{0};  // bit s: strategy s

// (plan key, gradient) of every shape whose strategy ran out of memory; the
// flag keeps plans free of any lookup until the first one.
struct OutOfMemoryRecord {
  std::mutex mutex;
  std::set<std::pair<std::vector<int64_t>, Gradient>> shapes;
  std::atomic<bool> any{false};
};

OutOfMemoryRecord& record() {
  static OutOfMemoryRecord instance;
  return instance;
}

std::vector<int64_t> shape_key(const Plan& plan) { return plan_key(plan.geometry, Forcing{}); }

bool ran_out(const std::vector<int64_t>& key, Gradient gradient) {
  OutOfMemoryRecord& r = record();
  std::lock_guard<std::mutex> lock(r.mutex);
  return r.shapes.count({key, gradient}) > 0;
}

void remember(const Plan& plan, Gradient gradient) {
  OutOfMemoryRecord& r = record();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.shapes.insert({shape_key(plan), gradient});
  r.any = true;
  forget_aten_calls();
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

void raise_if_injected(Strategy strategy) {
  if ((injected_strategies.load() & (1u << static_cast<int>(strategy))) == 0) return;
  TORCH_CHECK_WITH(OutOfMemoryError, false, "bwdconv: out of memory injected for ",
                   strategy_name(strategy), " (fault injection)");
}

}  // namespace

at::Tensor aten_if_out_of_memory(Gradient gradient, const Plan& plan,
                                 const std::function<at::Tensor()>& run,
                                 const std::function<at::Tensor()>& aten) {
  const Strategy strategy = plan.of(gradient).strategy;
  if (strategy == Strategy::aten) return run();
  try {
    raise_if_injected(strategy);
    return run();
  } catch (const c10::OutOfMemoryError& error) {
    remember(plan, gradient);
    TORCH_WARN("bwdconv: ", strategy_name(strategy), " ran out of memory computing the ",
               gradient_name(gradient), " gradient of ", shape_text(plan.geometry),
               "; aten computes it, and every later one of this shape in this process (",
               error.what_without_backtrace(), ")");
  }
  raise_if_injected(Strategy::aten);
  return aten();
}

std::shared_ptr<const Plan> avoiding_out_of_memory(std::shared_ptr<const Plan> plan) {
  if (!plan || !record().any.load()) return plan;
  const std::vector<int64_t> key = shape_key(*plan);
  std::shared_ptr<Plan> avoided;
  for (Gradient gradient : {Gradient::input, Gradient::weight}) {
    const GradientPlan& planned = plan->of(gradient);
    if (planned.strategy == Strategy::aten || !ran_out(key, gradient)) continue;
    if (!avoided) avoided = std::make_shared<Plan>(*plan);
    GradientPlan& replaced = gradient == Gradient::input ? avoided->input : avoided->weight;
    replaced.reason = std::string("aten: ") + strategy_name(planned.strategy) +
                      " ran out of memory on this shape in this process (planned: " +
                      planned.reason + ")";
    replaced.strategy = Strategy::aten;
    replaced.measured = false;
  }
  return avoided ? std::shared_ptr<const Plan>(std::move(avoided)) : plan;
}

void set_out_of_memory_strategies(const std::vector<Strategy>& strategies) {
  uint32_t bits = 0;
  for (Strategy strategy : strategies) bits |= 1u << static_cast<int>(strategy);
  injected_strategies = bits;
}

void forget_out_of_memory() {
  OutOfMemoryRecord& r = record();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.shapes.clear();
  r.any = false;
  forget_aten_calls();
}

}  // namespace bwdconv::ops
