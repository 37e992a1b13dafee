// swap1x1: how dx is written after the GEMM on the small grad_output
// (docs/DESIGN.md, "swap1x1").
#pragma once

#include <optional>
#include <string>

#include <vector>

#include "geometry.h"
#include "phase.h"

namespace bwdconv {

enum class Swap1x1Writer {
  fused,     // the GEMM writes a small result; one interleave pass writes all of dx from it
  in_place,  // a batched GEMM writes straight into dx's strided slots; a pass zeroes the holes
};

// Every writer, in the order explanations and the tuner list them.
constexpr Swap1x1Writer kSwap1x1Writers[] = {Swap1x1Writer::fused, Swap1x1Writer::in_place};

// Why swap1x1 cannot serve the geometry, or nothing when it can: the taps
// must not overlap, so that every dx element receives at most one of them:
// in every dim the dilated filter d(K-1)+1 is no longer than the stride (a
// 1x1 filter always; a transposed convolution's kernel = stride; see
// docs/DESIGN.md, "swap1x1").
std::optional<std::string> swap1x1_refusal(const ConvGeometry& geometry,
                                           const std::vector<Phase>& phases);

const char* swap1x1_writer_name(Swap1x1Writer writer);
// Every writer's name, in kSwap1x1Writers' order, comma-separated (for errors).
std::string known_swap1x1_writer_names();
std::optional<Swap1x1Writer> parse_swap1x1_writer(const std::string& name);

// Why the GEMM cannot write into dx's slots, or nothing when it can: the
// filter must be 1x1, dx channels_last with one group and no padding, and the slots' rows must
// form one uniformly strided batch: with s the stride and X the channels_last
// strides of dx, slot (n, o_0, ..., o_{d-1}) is at n*X_n + sum o_i*s_i*X_i;
// among the batch dims (n, o_0, ..., o_{d-2}) with more than one value, each
// must step its successor's count times its successor's step (e.g. 2D:
// X_n = O_0*s_0*X_0, i.e. I_0 = O_0*s_0, unless N = 1).
std::optional<std::string> in_place_refusal(const ConvGeometry& geometry);

// dx element offset between consecutive batches of the in-place GEMM (valid
// when in_place_refusal is empty): the step of the innermost batch dim with
// more than one value.
int64_t in_place_batch_stride(const ConvGeometry& geometry);

// Why `writer` cannot serve the geometry (in_place_refusal; fused always can).
std::optional<std::string> writer_refusal(Swap1x1Writer writer, const ConvGeometry& geometry);

// The writers worth timing for the geometry (the tuner's and the bench's):
// those that can serve.
std::vector<Swap1x1Writer> timed_writers(const ConvGeometry& geometry);

struct Swap1x1Choice {
  Swap1x1Writer writer = Swap1x1Writer::fused;
  std::string reason;
};

// The writer for a geometry swap1x1 serves: `forced` when given and it can
// serve, otherwise in_place on GPUs where it can serve and a GEMM row fills a
// 32-byte sector (faster than fused on the H200's channels_last U-Net layer,
// benchmarks/results/gpu-2026-11-28-h200), fused elsewhere. A
// writer forced where it cannot serve gives fused, or with `strict` throws
// std::invalid_argument with the reason.
Swap1x1Choice choose_swap1x1_writer(const ConvGeometry& geometry,
                                    std::optional<Swap1x1Writer> forced = std::nullopt,
                                    bool strict = false);

}  // namespace bwdconv
