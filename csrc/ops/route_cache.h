// A per-thread memo of the calls planned for aten alone (docs/DESIGN.md,
// "Pass-through"), so that such a call costs a key and one probe: no geometry,
// no plan lookup, no lock and no heap allocation. A key holds every argument
// field the call's validity and plan depend on; an entry is only trusted in
// the epoch it was made in, and everything that can change a plan (forcing,
// measured decisions, the tuning hook, an out-of-memory fallback) starts a new
// epoch.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/ArrayRef.h>

#include <array>
#include <cstdint>
#include <optional>

#include "ops/geometry.h"

namespace bwdconv::ops {

// The fields of one call, in order. Too many fields make it unusable: such a
// call is simply not memoised.
class CallKey {
 public:
  static constexpr int kMaxWords = 48;

  void add(int64_t word) {
    if (length_ == kMaxWords) {
      overflow_ = true;
      return;
    }
    words_[length_++] = word;
  }
  void add(c10::IntArrayRef words) {
    add(static_cast<int64_t>(words.size()));  // lengths keep adjacent lists apart
    for (const int64_t word : words) add(word);
  }
  // A tensor's sizes, dtype, device and suggested memory format.
  void add_operand(const at::Tensor& tensor);
  // A convolution's stride, padding, dilation, output padding and groups.
  void add_arguments(const ConvParams& params, c10::IntArrayRef output_padding);
  bool usable() const { return !overflow_; }
  uint64_t hash() const;
  bool operator==(const CallKey& other) const;

 private:
  std::array<int64_t, kMaxWords> words_{};
  int length_ = 0;
  bool overflow_ = false;
};

// What a memoised call counts in served() for each gradient it computes.
struct AtenCall {
  bool input = false, input_measured = false;
  bool weight = false, weight_measured = false;
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
  const CallKey& key_;
  uint64_t hash_ = 0;
  uint64_t epoch_ = 0;
  std::optional<AtenCall> found_;
};

// Counts the call's gradients in served(), as count_served would.
void count_aten_call(const AtenCall& call);

// Starts a new epoch: every thread's memo is stale from now on.
void forget_aten_calls();

}  // namespace bwdconv::ops
