#include "ops/precompiled.h"  // first, as the precompiled header must be

#include "ops/filter.h"

#include <atomic>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "ops/kernels.h"

namespace bwdconv::ops {

namespace {

at::Tensor adjoint_of(const at::Tensor& weight, int64_t groups) {
  const int64_t out_channels = weight.size(0), in_per_group = weight.size(1);
  std::vector<int64_t> grouped{groups, out_channels / groups, in_per_group};
  std::vector<int64_t> swapped{groups * in_per_group, out_channels / groups};
  std::vector<int64_t> flipped_dims;  // flipping a dim of size 1 would only copy
  for (int64_t d = 2; d < weight.dim(); ++d) {
    grouped.push_back(weight.size(d));
    swapped.push_back(weight.size(d));
    if (weight.size(d) > 1) flipped_dims.push_back(d);
  }
  const at::Tensor adjoint = weight.reshape(grouped).transpose(1, 2).reshape(swapped);
  return flipped_dims.empty() ? adjoint : adjoint.flip(flipped_dims);
}

}  // namespace

at::Tensor adjoint_filter(const at::Tensor& weight, int64_t groups) {
  return cached_filter(
      weight, [&] { return "adjoint groups " + std::to_string(groups); },
      [&] { return adjoint_of(weight, groups); });
}

std::string phase_taps_text(const Phase& phase) {
  std::string text;
  for (int i = 0; i < phase.spatial_dims; ++i) {
    const PhaseDim& pd = phase.dims[i];
    text += " " + std::to_string(pd.first_tap) + ":" + std::to_string(pd.tap_count) + ":" +
            std::to_string(pd.tap_step);
  }
  return text;
}

at::Tensor phase_adjoint_filter(const at::Tensor& weight, const Phase& phase, int64_t groups) {
  const auto transform = [&] {
    return "phase adjoint groups " + std::to_string(groups) + " taps" + phase_taps_text(phase);
  };
  return cached_filter(weight, transform,
                       [&] { return built_phase_adjoint_filter(weight, phase, groups); });
}

at::Tensor built_phase_adjoint_filter(const at::Tensor& weight, const Phase& phase,
                                      int64_t groups) {
  at::Tensor taps = weight;
  for (int i = 0; i < phase.spatial_dims; ++i) {
    const PhaseDim& pd = phase.dims[i];
    const int64_t last = pd.first_tap + (pd.tap_count - 1) * pd.tap_step;
    taps = taps.slice(i + 2, pd.first_tap, last + 1, pd.tap_step);
  }
  return adjoint_of(taps, groups);
}

namespace {

// Enough for every transposed layer of a large decoder; past it the least
// recently used entry goes.
constexpr size_t kMaxEntries = 256;

// The weight's storage (the StorageImpl's address: the weak reference an
// entry holds keeps it from being reused) and what identifies the rest.
using Key = std::tuple<const void*, std::string>;

struct Entry {
  c10::weak_intrusive_ptr<c10::StorageImpl> storage;
  int64_t version = 0;
  at::Tensor filter;
  uint64_t used = 0;
};

struct Cache {
  std::mutex mutex;
  std::map<Key, Entry> entries;
  uint64_t clock = 0;
  int64_t hits = 0, builds = 0;
};

Cache& cache() {
  static Cache* instance = new Cache();  // never destroyed: tensors outlive exit order
  return *instance;
}

std::atomic<int> scopes{0};

std::string describe(const at::Tensor& weight, const std::string& transform) {
  std::ostringstream key;
  key << transform << '|' << weight.sizes() << weight.strides() << weight.storage_offset() << '|'
      << weight.scalar_type();
  return key.str();
}

// Drops entries whose weight is gone, then the least recently used ones
// beyond kMaxEntries. Called with the mutex held.
void trim(Cache& c) {
  for (auto it = c.entries.begin(); it != c.entries.end();) {
    it = it->second.storage.expired() ? c.entries.erase(it) : std::next(it);
  }
  while (c.entries.size() > kMaxEntries) {
    auto oldest = c.entries.begin();
    for (auto it = c.entries.begin(); it != c.entries.end(); ++it) {
      if (it->second.used < oldest->second.used) oldest = it;
    }
    c.entries.erase(oldest);
  }
}

}  // namespace

at::Tensor cached_filter(const at::Tensor& weight, const std::function<std::string()>& transform,
                         const std::function<at::Tensor()>& build) {
  if (scopes.load() == 0 || weight.is_inference() || stream_capturing(weight)) return build();
  Cache& c = cache();
  const Key key{weight.storage().unsafeGetStorageImpl(), describe(weight, transform())};
  const int64_t version = weight._version();
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    auto found = c.entries.find(key);
    if (found != c.entries.end() && found->second.version == version &&
        !found->second.storage.expired()) {
      found->second.used = ++c.clock;
      ++c.hits;
      return found->second.filter;
    }
  }
  at::Tensor filter = build();
  if (filter.is_alias_of(weight)) return filter;  // a view costs nothing and would pin the weight
  std::lock_guard<std::mutex> lock(c.mutex);
  ++c.builds;
  c.entries.insert_or_assign(key,
                             Entry{weight.storage().getWeakStorageImpl(), version, filter, ++c.clock});
  trim(c);
  return filter;
}

void enter_weight_cache() { scopes.fetch_add(1); }

void exit_weight_cache() {
  if (scopes.fetch_sub(1) != 1) return;
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  c.entries.clear();
}

WeightCacheCounts weight_cache_counts() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  return {c.hits, c.builds, static_cast<int64_t>(c.entries.size())};
}

}  // namespace bwdconv::ops
