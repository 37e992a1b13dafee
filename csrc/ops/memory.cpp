#include "ops/precompiled.h"  // first, as the precompiled header must be

#include "ops/memory.h"

#include <c10/core/CPUAllocator.h>

#include <atomic>
#include <mutex>
#include <unordered_map>

namespace bwdconv::ops {
namespace {

// The sizes of the counted allocations by address: a raw deallocation
// (oneDNN's buffers through Allocator::raw_deallocate) gives the address alone.
struct Counts {
  std::atomic<int64_t> live{0};
  std::atomic<int64_t> peak{0};
  std::atomic<c10::DeleterFnPtr> free_original{nullptr};
  std::mutex sizes_mutex;
  std::unordered_map<void*, int64_t> sizes;
};

// Never destroyed: counted tensors may be freed while the process exits.
Counts& counts() {
  static Counts* instance = new Counts();
  return *instance;
}

void raise_peak(int64_t live) {
  std::atomic<int64_t>& peak = counts().peak;
  int64_t seen = peak.load();
  while (live > seen && !peak.compare_exchange_weak(seen, live)) {
  }
}

void add_counted(void* data, int64_t bytes) {
  Counts& c = counts();
  {
    std::lock_guard<std::mutex> lock(c.sizes_mutex);
    c.sizes[data] = bytes;
  }
  raise_peak(c.live += bytes);
}

// The deleter of a counted allocation, also after the count stopped; an
// address it does not know (allocated before the count) is freed uncounted.
void free_counted(void* data) {
  Counts& c = counts();
  int64_t bytes = 0;
  {
    std::lock_guard<std::mutex> lock(c.sizes_mutex);
    auto found = c.sizes.find(data);
    if (found != c.sizes.end()) {
      bytes = found->second;
      c.sizes.erase(found);
    }
  }
  c.live -= bytes;
  c.free_original.load()(data);
}

// Allocates with the original allocator and counts what it hands out as a
// plain pointer (its data is its context, freed by its raw deleter: all of
// c10's default CPU allocator's), keeping the DataPtr plain, so that
// raw_allocate and raw_deallocate keep working. Anything else passes uncounted.
// A storage allocated while counting keeps this allocator: what it allocates
// later (a resize) is counted too, which moves no region's figure.
class CountingAllocator final : public c10::Allocator {
 public:
  void wrap(c10::Allocator* original) {
    original_ = original;
    counts().free_original = original->raw_deleter();
  }
  c10::Allocator* original() const { return original_; }

  c10::DataPtr allocate(size_t bytes) override {
    c10::DataPtr allocated = original_.load()->allocate(bytes);
    void* data = allocated.get();
    if (data == nullptr || data != allocated.get_context() ||
        allocated.get_deleter() != counts().free_original.load()) {
      return allocated;
    }
    const c10::Device device = allocated.device();
    allocated.release_context();
    add_counted(data, static_cast<int64_t>(bytes));
    return {data, data, &free_counted, device};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &free_counted; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    original_.load()->copy_data(dest, src, count);
  }

 private:
  std::atomic<c10::Allocator*> original_{nullptr};
};

// Never destroyed: a thread may still be allocating through it when the
// original is put back.
CountingAllocator& counting_allocator() {
  static CountingAllocator* instance = new CountingAllocator();
  return *instance;
}

struct Installation {
  std::mutex mutex;
  int depth = 0;
  uint8_t priority = 0;
};

Installation& installation() {
  static Installation instance;
  return instance;
}

// c10 keeps an allocator only if its priority is at least the current one's,
// and does not say which that is: the lowest that takes is the current
// one's, which the original gets back.
uint8_t put_in_front(c10::Allocator* allocator) {
  for (int priority = 0; priority <= 255; ++priority) {
    c10::SetCPUAllocator(allocator, static_cast<uint8_t>(priority));
    if (c10::GetCPUAllocator() == allocator) return static_cast<uint8_t>(priority);
  }
  TORCH_CHECK(false, "bwdconv: c10 kept its CPU allocator at every priority");
}

}  // namespace

void start_counting_cpu_bytes() {
  Installation& in = installation();
  std::lock_guard<std::mutex> lock(in.mutex);
  if (in.depth++ > 0) return;
  c10::Allocator* original = c10::GetCPUAllocator();
  if (original->raw_deleter() == nullptr) {
    --in.depth;
    TORCH_CHECK(false, "bwdconv: the CPU allocator has no raw deleter; its bytes cannot be counted");
  }
  counting_allocator().wrap(original);
  in.priority = put_in_front(&counting_allocator());
}

void stop_counting_cpu_bytes() {
  Installation& in = installation();
  std::lock_guard<std::mutex> lock(in.mutex);
  TORCH_CHECK(in.depth > 0, "bwdconv: no count of CPU bytes to stop");
  if (--in.depth > 0) return;
  c10::SetCPUAllocator(counting_allocator().original(), in.priority);
}

int64_t counted_cpu_bytes() { return counts().live.load(); }

int64_t counted_cpu_peak() { return counts().peak.load(); }

void reset_counted_cpu_peak() { counts().peak = counts().live.load(); }

void register_memory_bindings(pybind11::module& m) {
  m.def("start_counting_cpu_bytes", &start_counting_cpu_bytes);
  m.def("stop_counting_cpu_bytes", &stop_counting_cpu_bytes);
  m.def("counted_cpu_bytes", &counted_cpu_bytes);
  m.def("counted_cpu_peak", &counted_cpu_peak);
  m.def("reset_counted_cpu_peak", &reset_counted_cpu_peak);
}

}  // namespace bwdconv::ops
