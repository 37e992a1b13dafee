#include "ops/route_cache.h"

#include <algorithm>
#include <atomic>

#include "dispatch/strategies.h"
#include "ops/backward.h"

namespace bwdconv::ops {
namespace {

// Epoch 0 marks an empty entry.
std::atomic<uint64_t> epoch{1};

struct Entry {
  uint64_t hash = 0;
  uint64_t epoch = 0;
  CallKey key;
  AtenCall call;
};

// A small open-addressed table: a key lives in one of kProbes slots from its
// hash's. A model's convolutions fit many times over; a key that finds no
// free slot replaces its first one.
constexpr size_t kSlots = 128;
constexpr size_t kProbes = 4;
thread_local std::array<Entry, kSlots> memo;

size_t slot(uint64_t hash, size_t probe) { return (hash + probe) % kSlots; }

}  // namespace

uint64_t CallKey::hash() const {
  uint64_t h = 0x9e3779b97f4a7c15ull ^ static_cast<uint64_t>(length_);
  for (int i = 0; i < length_; ++i) {
    h = (h ^ static_cast<uint64_t>(words_[i])) * 0xff51afd7ed558ccdull;
    h ^= h >> 32;
  }
  return h;
}

void CallKey::add_operand(const at::Tensor& tensor) {
  add(tensor.sizes());
  add(static_cast<int64_t>(tensor.scalar_type()) |
      static_cast<int64_t>(tensor.device().type()) << 8 |
      static_cast<int64_t>(tensor.device().index() + 1) << 16 |
      static_cast<int64_t>(tensor.suggest_memory_format()) << 32);
}

void CallKey::add_arguments(const ConvParams& params, c10::IntArrayRef output_padding) {
  add(params.stride);
  add(params.padding);
  add(params.dilation);
  add(output_padding);
  add(params.groups);
}

bool CallKey::operator==(const CallKey& other) const {
  return length_ == other.length_ && overflow_ == other.overflow_ &&
         std::equal(words_.begin(), words_.begin() + length_, other.words_.begin());
}

AtenCallLookup::AtenCallLookup(const CallKey& key) : key_(key) {
  if (!key.usable()) return;
  hash_ = key.hash();
  epoch_ = epoch.load(std::memory_order_acquire);
  for (size_t probe = 0; probe < kProbes; ++probe) {
    const Entry& entry = memo[slot(hash_, probe)];
    if (entry.epoch == epoch_ && entry.hash == hash_ && entry.key == key) {
      found_ = entry.call;
      return;
    }
  }
}

void AtenCallLookup::remember(const AtenCall& call) const {
  if (!key_.usable()) return;
  Entry* chosen = &memo[slot(hash_, 0)];
  for (size_t probe = 0; probe < kProbes; ++probe) {
    Entry& entry = memo[slot(hash_, probe)];
    if (entry.epoch != epoch_ || (entry.hash == hash_ && entry.key == key_)) {
      chosen = &entry;
      break;
    }
  }
  *chosen = Entry{hash_, epoch_, key_, call};
}

void count_aten_call(const AtenCall& call) {
  if (call.input) count_served(Gradient::input, Strategy::aten, call.input_measured);
  if (call.weight) count_served(Gradient::weight, Strategy::aten, call.weight_measured);
}

void forget_aten_calls() { epoch.fetch_add(1, std::memory_order_acq_rel); }

}  // namespace bwdconv::ops
