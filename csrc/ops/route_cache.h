// A per-thread memo of the calls planned for aten alone (docs/DESIGN.md,
// "Pass-through"), so that such a call costs a key and one probe: no geometry,
// no plan lookup, no lock and no heap allocation. A key digests every
// argument field the call's validity and plan depend on into 128 bits; an
// entry is only trusted in the epoch it was made in, and everything that can
// change a plan (forcing, measured decisions, the tuning hook, an
// out-of-memory fallback) starts a new epoch.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/ArrayRef.h>

#include <cstdint>
#include <optional>

#include "ops/geometry.h"

namespace bwdconv::ops {

// The fields of one call, in order, digested as they are added into two
// 64-bit words by two unrelated mixes. Entries are compared by digest: two
// calls that differ but share all 128 bits would share a route (were the
// digests random, any two of 2^32 keys would share one with a chance of
// about 2^-65), and the one it wrongly sends to aten still gets aten's
// correct result, or PyTorch's error if it is invalid. Kept small, so that a
// probe touches one cache line: between a model's operations the lines a
// call touches cost more than its instructions.
class CallKey {
 public:
  void add(int64_t word) {
    const uint64_t w = static_cast<uint64_t>(word);
    first_ = (first_ ^ w) * 0xff51afd7ed558ccdull;
    first_ ^= first_ >> 32;
    second_ = (second_ + w + 0x632be59bd9b4e019ull) * 0xc4ceb9fe1a85ec53ull;
    second_ ^= second_ >> 29;
  }
  void add(c10::IntArrayRef words) {
    add(static_cast<int64_t>(words.size()));  // lengths keep adjacent lists apart
    for (const int64_t word : words) add(word);
  }
  // A tensor's sizes, dtype, device and suggested memory format.
  void add_operand(const at::Tensor& tensor);
  // A convolution's stride, padding, dilation, output padding and groups.
  void add_arguments(const ConvParams& params, c10::IntArrayRef output_padding);

  uint64_t first() const { return first_; }
  uint64_t second() const { return second_; }

 private:
  uint64_t first_ = 0x9e3779b97f4a7c15ull;
  uint64_t second_ = 0x2545f4914f6cdd1dull;
};

// What a memoised call counts in served() for each gradient it computes;
// `forward`: its input gradient is a transposed convolution's forward.
struct AtenCall {
  bool input = false, input_measured = false;
  bool weight = false, weight_measured = false;
  bool forward = false;
};

// This thread's memo of `key` in the epoch current when the lookup is made:
// found() when the call is memoised, else remember() memoises what the
// caller then finds. A plan changed after the lookup started a new epoch,
// so a verdict made from it is never trusted.
class AtenCallLookup {
 public:
  explicit AtenCallLookup(const CallKey& key);
  const std::optional<AtenCall>& found() const { return found_; }
  void remember(const AtenCall& call) const;

 private:
  CallKey key_;
  uint64_t epoch_ = 0;
  std::optional<AtenCall> found_;
};

// Counts the call's gradients in served(), as count_served would.
void count_aten_call(const AtenCall& call);

// Starts a new epoch: every thread's memo is stale from now on.
void forget_aten_calls();

}  // namespace bwdconv::ops
