#include "ops/precompiled.h"  // first, as the precompiled header must be

#include "ops/route_cache.h"

#include <array>
#include <atomic>

#include "dispatch/strategies.h"
#include "ops/backward.h"
#include "ops/decisions.h"

namespace bwdconv::ops {
namespace {

// Epoch 0 marks an empty entry.
std::atomic<uint64_t> epoch{1};

struct Entry {
  uint64_t first = 0, second = 0;
  uint64_t epoch = 0;
  AtenCall call;

  bool holds(const CallKey& key, uint64_t current) const {
    return epoch == current && first == key.first() && second == key.second();
  }
};

// A small open-addressed table: a key lives in one of kProbes slots from its
// digest's; a key that finds no free slot replaces its first one. 512 slots
// (16 KiB) keep a model's distinct calls: measured on the CPU, a tiny call
// cycling through 200 distinct keys paid +2.0 us (functional scope) and
// +1.9 us (aten scope) over no bwdconv with 128 slots, +1.6 and +0.8 with
// 512; through 20 keys +0.8 and +0.3 with either.
constexpr size_t kSlots = 512;
constexpr size_t kProbes = 4;
using Table = std::array<Entry, kSlots>;

// One table for the thread's own calls and one for the tuner's while it runs
// on the thread: the tuner plans apart, without measured decisions
// (decisions.h), so the same call can route otherwise there; each mode's
// calls still cost one probe.
thread_local std::array<Table, 2> tables;

Table& memo() { return tables[tuning_on_this_thread() ? 1 : 0]; }

size_t slot(const CallKey& key, size_t probe) { return (key.first() + probe) % kSlots; }

}  // namespace

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

AtenCallLookup::AtenCallLookup(const CallKey& key)
    : key_(key), epoch_(epoch.load(std::memory_order_acquire)) {
  const Table& table = memo();
  for (size_t probe = 0; probe < kProbes; ++probe) {
    const Entry& entry = table[slot(key_, probe)];
    if (entry.holds(key_, epoch_)) {
      found_ = entry.call;
      return;
    }
  }
}

void AtenCallLookup::remember(const AtenCall& call) const {
  Table& table = memo();
  Entry* chosen = &table[slot(key_, 0)];
  for (size_t probe = 0; probe < kProbes; ++probe) {
    Entry& entry = table[slot(key_, probe)];
    if (entry.epoch != epoch_ || entry.holds(key_, epoch_)) {
      chosen = &entry;
      break;
    }
  }
  *chosen = Entry{key_.first(), key_.second(), epoch_, call};
}

void count_aten_call(const AtenCall& call) {
  if (call.input) {
    count_served(call.forward ? Served::forward : Served::input, Strategy::aten,
                 call.input_measured);
  }
  if (call.weight) count_served(Served::weight, Strategy::aten, call.weight_measured);
}

void forget_aten_calls() { epoch.fetch_add(1, std::memory_order_acq_rel); }

}  // namespace bwdconv::ops
