#include "plan.h"

#include <stdexcept>

namespace bwdconv {

namespace {

int64_t input_elements(const ConvGeometry& g) {
  int64_t elements = g.batch * g.in_channels;
  for (int i = 0; i < g.spatial_dims; ++i) elements *= g.input[i];
  return elements;
}

// Below this many dx elements, launches and passes dominate: one stacked
// convolution beats stride^d separate ones. A starting point, to be tuned.
constexpr int64_t kSmallInputGradient = int64_t{1} << 16;

// What the seeds' reports (AMD MI355x, IREE) suggest on a GPU for a strided
// input gradient, and for a weight gradient (seed 001's heuristics).
std::pair<Strategy, std::string> seed_rule_input(const ConvGeometry& g,
                                                 const std::vector<Phase>& phases) {
  if (!swap1x1_refusal(g, phases)) {
    return {Strategy::swap1x1,
            "filter within the stride (1x1, or kernel = stride): one GEMM on the small "
            "grad_output, then a strided scatter of the small result"};
  }
  if (input_elements(g) <= kSmallInputGradient &&
      !refusal(Strategy::phase_stacked, Gradient::input, g, phases)) {
    return {Strategy::phase_stacked,
            "small problem: all phases in one stride-1 convolution, then one interleave pass"};
  }
  return {Strategy::phase,
          "stride > 1: one stride-1 sub-convolution per non-empty phase, no work on "
          "inserted zeros"};
}

std::pair<Strategy, std::string> seed_rule_weight(const ConvGeometry& g) {
  if (auto why_not = splitk_not_worth_it(g)) {
    return {Strategy::aten, "splitting the reduction is not expected to pay: " + *why_not};
  }
  return {Strategy::splitk,
          "long reduction next to a small weight gradient: split it into chunks"};
}

// Nothing is chosen over aten on a GPU by rule ("never slower than before"):
// on an H200 the seeds' choices won some seed lines and lost others of the
// same kind (1x1 stride-2 input gradients in float16 and bfloat16: swap1x1
// 0.61x-1.32x, phase 0.48x-1.22x against cuDNN; 3x3 stride 2: aten on every
// line; benchmarks/results/gpu-2026-11-27-h200), with no feature of the shape
// that separates them yet. The autotuner measures each shape on the user's
// GPU; the reason names the seeds' choice so that explain() shows what the
// tuner would try.
std::pair<Strategy, std::string> unmeasured_on_gpu(std::pair<Strategy, std::string> seed) {
  if (seed.first == Strategy::aten) return seed;
  return {Strategy::aten, std::string("not yet measured on GPUs for this shape: aten unless the "
                                      "autotuner measures the seeds' choice faster, ") +
                              strategy_name(seed.first) + " (" + seed.second + ")"};
}

// On the CPU, oneDNN's strided float16 backward in channels_last is several
// times slower than its stride-1 convolutions, so phase's stride-1
// sub-convolutions win once the channels are wide enough to keep them busy
// (benchmarks/results/cpu-2026-11-23-float16-channels-last: 1.4x-7.3x over
// aten at these bounds; slower or level below them, with groups or in 3D).
constexpr int64_t kFloat16PhaseMinInChannels = 32;
constexpr int64_t kFloat16PhaseMinOutChannels = 64;
constexpr int64_t kFloat16PhaseMinInputElements = 8192;

bool float16_channels_last_phase_pays_on_cpu(const ConvGeometry& g) {
  return g.dtype == DType::Float16 && g.layout == MemoryLayout::ChannelsLast &&
         g.spatial_dims == 2 && g.groups == 1 && g.in_channels >= kFloat16PhaseMinInChannels &&
         g.out_channels >= kFloat16PhaseMinOutChannels &&
         input_elements(g) >= kFloat16PhaseMinInputElements;
}

// The flops of either gradient of `g` (2 x its multiply-adds, as many as its
// forward's).
int64_t gradient_flops(const ConvGeometry& g) {
  int64_t flops = 2 * g.batch * g.out_channels * g.filter_in_channels;
  for (int i = 0; i < g.spatial_dims; ++i) flops *= g.output[i] * g.filter[i];
  return flops;
}

// 1x1 filters with stride > 1 on the CPU, 2D, one group, timed as a call pays
// it (bwdconv's per-call cost included; benchmarks/results/cpu-2026-11-26-rules):
// in bfloat16 NCHW swap1x1 beat aten on every line from 2^18 flops
// (1.17x-2.13x, batch 2 to ResNet-50's batch 32, and the smallest seed line
// at 1/8 scale, 2^18.2 flops); in float32 NCHW it beat aten on ResNet-50's
// three 1x1/2 lines at batch 32 (1.17x-1.53x, from 2^31 flops) but went
// either way below (0.78x-1.65x, losing from 2^24 to 2^26 flops); in bfloat16
// channels_last it lost on 5 of 10 lines at batch 2 (0.90x-1.84x) and on one
// of ResNet-50's three (0.93x-1.33x). Autotuning finds the wins these rules
// leave.
constexpr int64_t kBFloat16Swap1x1MinFlops = int64_t{1} << 18;
constexpr int64_t kFloat32Swap1x1MinFlops = int64_t{1} << 31;

bool swap1x1_pays_on_cpu(const ConvGeometry& g) {
  if (!all_equal_to(g.filter, g.spatial_dims, 1) || g.spatial_dims != 2 || g.groups != 1 ||
      g.layout != MemoryLayout::Contiguous) {
    return false;
  }
  const int64_t flops = gradient_flops(g);
  return (g.dtype == DType::BFloat16 && flops >= kBFloat16Swap1x1MinFlops) ||
         (g.dtype == DType::Float32 && flops >= kFloat32Swap1x1MinFlops);
}

// A transposed convolution's forward on the CPU, where aten runs oneDNN's
// deconvolution rather than its backward (docs/DESIGN.md, "Transposed
// convolutions"). In float32 and bfloat16 it matched or beat every strategy on
// the transposed suite in both layouts, but for one output channel (FSRCNN),
// left to autotuning; in float16 channels_last its deconvolution is as slow as
// its strided backward, and the matching input gradient's rule holds: phase
// 2.0x-5.5x on the five lines it picks, both unpicked U-Net lines slower
// (benchmarks/results/cpu-2026-11-26-transposed).
std::pair<Strategy, std::string> choose_transposed_forward_on_cpu(const ConvGeometry& g) {
  if (!all_equal_to(g.stride, g.spatial_dims, 1) && float16_channels_last_phase_pays_on_cpu(g)) {
    return {Strategy::phase,
            "a transposed convolution's forward in float16 channels_last with wide channels on "
            "the CPU: stride-1 sub-convolutions (measured faster than aten's deconvolution)"};
  }
  return {Strategy::aten,
          "a transposed convolution's forward on the CPU: aten's own transposed convolution "
          "(oneDNN's deconvolution matched or beat every strategy on the transposed suite)"};
}

// The default strategy for the input gradient and why. Simple rules until
// measured choices replace them: on the CPU they follow the CPU measurements
// in benchmarks/results (python -m bwdconv.bench).
std::pair<Strategy, std::string> choose_input(const ConvGeometry& g,
                                              const std::vector<Phase>& phases) {
  if (g.transposed && g.device == DeviceKind::CPU) return choose_transposed_forward_on_cpu(g);
  if (all_equal_to(g.stride, g.spatial_dims, 1)) {
    return {Strategy::aten, "stride 1: there are no inserted zeros to skip"};
  }
  if (g.device != DeviceKind::CPU) return unmeasured_on_gpu(seed_rule_input(g, phases));
  if (float16_channels_last_phase_pays_on_cpu(g)) {
    return {Strategy::phase,
            "float16 channels_last with wide channels on the CPU: stride-1 sub-convolutions "
            "(measured faster than aten's strided float16 backward)"};
  }
  if (swap1x1_pays_on_cpu(g)) {
    return {Strategy::swap1x1,
            "1x1 filter with stride > 1: a GEMM on the small grad_output, then a strided "
            "scatter of the small result (measured faster than aten on the CPU in NCHW, "
            "bfloat16 from 2^18 flops and float32 from 2^31)"};
  }
  return {Strategy::aten,
          "on the CPU, aten's strided backward matched or beat phase, phase_stacked and "
          "scatter at ResNet sizes, and swap1x1 outside NCHW 1x1 problems in bfloat16 and "
          "large ones in float32"};
}

// float16 weight gradients on the CPU, where aten has no fast float16
// reduction: splitk (fp32 partials on the vendor GEMM) beat aten on all 18
// lines of at least 2^20 multiply-adds x 2 (1.26x-57.7x: the transposed suite
// at 1/4 scale and ResNet-50 at 1/8, both layouts); below, small problems
// went either way (0.18x-9.8x) (benchmarks/results/cpu-2026-11-26-transposed).
constexpr int64_t kFloat16SplitkMinFlops = int64_t{1} << 20;

std::pair<Strategy, std::string> choose_weight(const ConvGeometry& g,
                                               const std::vector<Phase>& phases) {
  if (g.device != DeviceKind::CPU) return unmeasured_on_gpu(seed_rule_weight(g));
  if (g.dtype == DType::Float16 && gradient_flops(g) >= kFloat16SplitkMinFlops &&
      !refusal(Strategy::splitk, Gradient::weight, g, phases)) {
    return {Strategy::splitk,
            "float16 on the CPU from 2^20 flops: fp32 partials on the GEMM (measured faster "
            "than aten's float16 weight gradient)"};
  }
  return {Strategy::aten,
          "on the CPU, aten's weight gradient beat splitk on the scaled seed shapes"};
}

GradientPlan plan_gradient(Gradient gradient, const ConvGeometry& g,
                           const std::vector<Phase>& phases, std::optional<Strategy> forced) {
  GradientPlan plan;
  const std::optional<std::string> forced_refusal =
      forced ? refusal(*forced, gradient, g, phases) : std::nullopt;
  if (forced && !forced_refusal) {
    plan.strategy = *forced;
    plan.reason = std::string("forced: ") + strategy_name(*forced);
  } else {
    auto [strategy, reason] =
        gradient == Gradient::input ? choose_input(g, phases) : choose_weight(g, phases);
    plan.strategy = strategy;
    plan.reason = forced ? std::string("forced ") + strategy_name(*forced) +
                               " cannot serve it: " + *forced_refusal + "; planned: " + reason
                         : reason;
  }
  plan.candidates.reserve(kStrategyCount);
  for (Strategy strategy : all_strategies()) {
    Candidate c;
    c.strategy = strategy;
    if (auto why_not = refusal(strategy, gradient, g, phases)) {
      c.refusal = std::move(*why_not);
    } else {
      c.serves = true;
    }
    plan.candidates.push_back(std::move(c));
  }
  return plan;
}

}  // namespace

std::string candidate_reason(const GradientPlan& plan, const Candidate& candidate) {
  if (!candidate.serves) return candidate.refusal;
  if (candidate.strategy == plan.strategy) return "chosen: " + plan.reason;
  return std::string(plan.measured ? "measured: ranked below " : "ranked below ") +
         strategy_name(plan.strategy);
}

Plan make_plan(const ConvGeometry& geometry, std::optional<Strategy> forced,
               std::optional<Swap1x1Writer> forced_writer, bool strict) {
  if (auto error = find_geometry_error(geometry)) throw std::invalid_argument(*error);
  Plan plan;
  plan.geometry = geometry;
  plan.phases = enumerate_phases(geometry);
  if (strict && forced && refusal(*forced, Gradient::input, geometry, plan.phases) &&
      refusal(*forced, Gradient::weight, geometry, plan.phases)) {
    throw std::invalid_argument(
        std::string("strategy ") + strategy_name(*forced) + " cannot serve this shape: " +
        *refusal(*forced, Gradient::input, geometry, plan.phases) + " (input gradient); " +
        *refusal(*forced, Gradient::weight, geometry, plan.phases) + " (weight gradient)");
  }
  plan.input = plan_gradient(Gradient::input, geometry, plan.phases, forced);
  plan.weight = plan_gradient(Gradient::weight, geometry, plan.phases, forced);
  plan.scatter = make_scatter_geometry(geometry);
  if (!phase_stacked_refusal(geometry, plan.phases)) {
    plan.stacked = make_stacked_geometry(geometry, plan.phases);
  }
  plan.splitk = make_splitk_geometry(geometry);
  if (!refusal(Strategy::swap1x1, Gradient::input, geometry, plan.phases)) {
    const bool computes_input = plan.input.strategy == Strategy::swap1x1;
    plan.swap1x1 =
        choose_swap1x1_writer(geometry, computes_input ? forced_writer : std::nullopt, strict);
  }
  return plan;
}

}  // namespace bwdconv
