#include "swap1x1.h"

#include <stdexcept>
#include <utility>
#include <vector>

namespace bwdconv {
namespace {

// The GEMM's batch dims (n, o_0, ..., o_{d-2}) of dx's slots, with counts
// greater than one (the others never step): count and element step in
// channels_last dx, whose strides are X_i = C * prod(I_{i+1..}), X_n = C * prod(I).
struct BatchDim {
  int64_t count;
  int64_t step;
};

std::vector<BatchDim> stepping_batch_dims(const ConvGeometry& g) {
  SpatialSizes x{};
  int64_t step = g.in_channels;
  for (int i = g.spatial_dims - 1; i >= 0; --i) {
    x[i] = step;
    step *= g.input[i];
  }
  std::vector<BatchDim> dims{{g.batch, step}};
  for (int i = 0; i + 1 < g.spatial_dims; ++i) dims.push_back({g.output[i], g.stride[i] * x[i]});
  std::vector<BatchDim> stepping;
  for (const BatchDim& d : dims) {
    if (d.count > 1) stepping.push_back(d);
  }
  return stepping;
}

}  // namespace

std::optional<std::string> swap1x1_refusal(const ConvGeometry& g, const std::vector<Phase>&) {
  for (int i = 0; i < g.spatial_dims; ++i) {
    if (g.dilated_filter(i) > g.stride[i]) {
      return "the dilated filter " + std::to_string(g.dilated_filter(i)) + " is longer than the "
             "stride " + std::to_string(g.stride[i]) + " in dim " + std::to_string(i) +
             ": its taps overlap (swap1x1 needs a filter within the stride, 1x1 or kernel = "
             "stride)";
    }
  }
  return std::nullopt;
}

const char* swap1x1_writer_name(Swap1x1Writer writer) {
  switch (writer) {
    case Swap1x1Writer::fused: return "fused";
    case Swap1x1Writer::in_place: return "in_place";
  }
  return "?";
}

std::string known_swap1x1_writer_names() {
  std::string names;
  for (const Swap1x1Writer writer : kSwap1x1Writers) {
    names += std::string(names.empty() ? "" : ", ") + swap1x1_writer_name(writer);
  }
  return names;
}

std::optional<Swap1x1Writer> parse_swap1x1_writer(const std::string& name) {
  for (const Swap1x1Writer writer : kSwap1x1Writers) {
    if (name == swap1x1_writer_name(writer)) return writer;
  }
  return std::nullopt;
}

std::optional<std::string> writer_refusal(Swap1x1Writer writer, const ConvGeometry& g) {
  switch (writer) {
    case Swap1x1Writer::fused: return std::nullopt;
    case Swap1x1Writer::in_place: return in_place_refusal(g);
  }
  return std::nullopt;
}

std::optional<std::string> in_place_refusal(const ConvGeometry& g) {
  if (g.layout != MemoryLayout::ChannelsLast) return "dx is not channels_last";
  if (g.groups != 1) return "grouped: the GEMM is a grouped convolution";
  const int last = g.spatial_dims - 1;
  for (int i = 0; i < g.spatial_dims; ++i) {
    if (g.padding[i] != 0) return "padding crops the first slots";
    // Tap t's slots s*o + t*d, o < O, are all of its phase's positions in dx
    // only where s*O reaches past dx (docs/DESIGN.md, "swap1x1"): the writer
    // zeroes only the phases without a tap.
    if (g.filter[i] > 1 && g.stride[i] * g.output[i] < g.input[i]) {
      return "the taps' slots end before dx does in dim " + std::to_string(i) +
             " (input " + std::to_string(g.input[i]) + ", " + std::to_string(g.output[i]) +
             " outputs of stride " + std::to_string(g.stride[i]) + ")";
    }
  }
  // The last dim's taps side by side: each GEMM row writes K_last*C
  // consecutive elements.
  if (g.filter[last] > 1 && g.dilation[last] != 1) return "the last dim's taps are dilated";
  // One uniformly strided batch: each dim steps its successor's count times its step.
  const std::vector<BatchDim> dims = stepping_batch_dims(g);
  for (size_t i = 0; i + 1 < dims.size(); ++i) {
    if (dims[i].step != dims[i + 1].count * dims[i + 1].step) {
      return "the slots' rows are not one uniformly strided batch (input " +
             format_sizes(g.input, g.spatial_dims) + ", stride " +
             format_sizes(g.stride, g.spatial_dims) + ")";
    }
  }
  return std::nullopt;
}

int64_t in_place_batch_stride(const ConvGeometry& g) {
  const std::vector<BatchDim> dims = stepping_batch_dims(g);
  return dims.empty() ? 1 : dims.back().step;  // a single batch never steps
}

std::vector<Swap1x1Writer> timed_writers(const ConvGeometry& g) {
  std::vector<Swap1x1Writer> writers;
  for (const Swap1x1Writer writer : kSwap1x1Writers) {
    if (!writer_refusal(writer, g)) writers.push_back(writer);
  }
  return writers;
}

// A GPU's unit of memory access (NVIDIA's L2 sector; 32 bytes on AMD's
// CDNA as well).
constexpr int64_t kSectorBytes = 32;

Swap1x1Choice choose_swap1x1_writer(const ConvGeometry& g, std::optional<Swap1x1Writer> forced,
                                    bool strict) {
  const std::optional<std::string> refused = in_place_refusal(g);
  const auto choice = [](Swap1x1Writer writer, std::string reason) {
    return Swap1x1Choice{writer, std::move(reason)};
  };
  if (forced) {
    if (const auto forced_refused = writer_refusal(*forced, g)) {
      const std::string name = swap1x1_writer_name(*forced);
      if (strict) {
        throw std::invalid_argument("swap1x1 writer " + name + " cannot serve this shape: " +
                                    *forced_refused);
      }
      return choice(Swap1x1Writer::fused, "forced " + name + " cannot serve it: " + *forced_refused);
    }
    return choice(*forced, "forced");
  }
  if (refused) return choice(Swap1x1Writer::fused, "in_place refused: " + *refused);
  if (g.device == DeviceKind::CPU) {
    return choice(Swap1x1Writer::fused,
                  "on the CPU in_place never beat fused (benchmarks/results/"
                  "cpu-2026-11-23-swap1x1-writers)");
  }
  // a GEMM row: the last dim's taps side by side, C channels each
  const int64_t row_bytes = g.filter[g.spatial_dims - 1] * g.in_channels * dtype_bytes(g.dtype);
  if (row_bytes < kSectorBytes) {
    return choice(Swap1x1Writer::fused,
                  "dx's channel rows (" + std::to_string(row_bytes) +
                      " B) are narrower than a 32-byte sector: the GEMM's rows and the holes' "
                      "zeros would share sectors (docs/DESIGN.md, \"swap1x1\")");
  }
  return choice(Swap1x1Writer::in_place,
                "the GEMM writes dx's slots directly and only the holes are zeroed: the small "
                "result is never stored or read back (U-Net's k2 s2 channels_last layer: 0.084 ms "
                "against fused's 0.104 ms on the H200, benchmarks/results/gpu-2026-11-28-h200)");
}

}  // namespace bwdconv
