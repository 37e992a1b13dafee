#include "host_grid.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <tuple>

#include <ucontext.h>

namespace bwdconv::hip::host {

struct AccessRecord {
  uintptr_t address;
  uint32_t bytes;
  uint32_t lane;  // linear index within the block
  const char* file;
  int line;
  uint32_t occurrence;  // how many times this lane reached the site before
  Access kind;
};

struct SiteCount {
  Access kind;
  const char* file;
  int line;
  uint32_t count;
};

struct LaneLog {
  std::vector<AccessRecord> records;  // of the block being run
  std::vector<SiteCount> sites;       // of the lane being run
  uint32_t lane = 0;
};

void append_access(LaneLog& log, Access kind, const void* address, size_t bytes,
                   const char* file, int line) {
  uint32_t occurrence = 0;
  auto site = std::find_if(log.sites.begin(), log.sites.end(), [&](const SiteCount& s) {
    return s.kind == kind && s.file == file && s.line == line;
  });
  if (site == log.sites.end()) {
    log.sites.push_back({kind, file, line, 1});
  } else {
    occurrence = site->count++;
  }
  log.records.push_back({reinterpret_cast<uintptr_t>(address), static_cast<uint32_t>(bytes),
                         log.lane, file, line, occurrence, kind});
}

namespace {

// The threads blocks run on: the host's hardware threads, at least 1.
int64_t hardware_threads() {
  return std::max<unsigned>(1, std::thread::hardware_concurrency());
}

constexpr int kSectorBytes = 32;

#if BWDCONV_LANES_AS_THREADS
// A block's barrier: the last lane to arrive releases the others.
class SyncPoint {
 public:
  explicit SyncPoint(int lanes) : lanes_(lanes) {}

  void arrive_and_wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    const uint64_t generation = generation_;
    if (++arrived_ == lanes_) {
      arrived_ = 0;
      ++generation_;
      released_.notify_all();
      return;
    }
    released_.wait(lock, [&] { return generation_ != generation; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable released_;
  const int lanes_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
};

#else
// A block's lanes as fibers (ucontext) on the calling thread. A lane runs
// until it reaches __syncthreads or returns; one round resumes every lane
// still running, so the end of a round is the barrier's release.
class SyncPoint {
 public:
  using Resume = std::function<void(int64_t)>;

  explicit SyncPoint(int lanes) : lanes_(lanes), contexts_(lanes), done_(lanes) {
    while (static_cast<int>(stacks().size()) < lanes) {
      stacks().emplace_back(new char[kStackBytes]);
    }
  }

  // Runs every lane of one block: `lane_body(t)` on lane t's fiber, with
  // `before_resume(t)` called each time lane t is about to run.
  void run_block(const Resume& lane_body, const Resume& before_resume, const char* kernel) {
    lane_body_ = &lane_body;
    for (int t = 0; t < lanes_; ++t) {
      getcontext(&contexts_[t]);
      contexts_[t].uc_stack.ss_sp = stacks()[t].get();
      contexts_[t].uc_stack.ss_size = kStackBytes;
      contexts_[t].uc_link = &scheduler_;
      makecontext(&contexts_[t], &SyncPoint::lane_entry, 0);
      done_[t] = false;
    }
    for (bool waiting = true; waiting;) {
      int finished = 0, at_barrier = 0;
      for (int t = 0; t < lanes_; ++t) {
        if (done_[t]) continue;
        current_ = t;
        before_resume(t);
        running() = this;
        swapcontext(&scheduler_, &contexts_[t]);
        ++(done_[t] ? finished : at_barrier);
      }
      if (finished > 0 && at_barrier > 0) {
        std::fprintf(stderr,
                     "bwdconv host grid: kernel %s: lanes returned while others wait at "
                     "__syncthreads\n",
                     kernel);
        std::abort();
      }
      waiting = at_barrier > 0;
    }
  }

  // __syncthreads from the running lane: back to the round.
  void arrive_and_wait() { swapcontext(&contexts_[current_], &scheduler_); }

 private:
  static constexpr size_t kStackBytes = size_t{256} << 10;

  // The stacks, allocated once: one synchronized launch runs at a time.
  static std::vector<std::unique_ptr<char[]>>& stacks() {
    static std::vector<std::unique_ptr<char[]>> pool;
    return pool;
  }
  static SyncPoint*& running() {
    static SyncPoint* block = nullptr;
    return block;
  }
  static void lane_entry() {
    SyncPoint* self = running();
    (*self->lane_body_)(self->current_);
    self->done_[self->current_] = true;
  }

  const int lanes_;
  ucontext_t scheduler_;
  std::vector<ucontext_t> contexts_;
  std::vector<bool> done_;
  int current_ = 0;
  const Resume* lane_body_ = nullptr;
};
#endif

struct BlockContext {
  const KernelLabel* label = nullptr;
  SyncPoint* barrier = nullptr;  // null: independent lanes
};
thread_local BlockContext block_context;

Dim3 unravel(int64_t linear, Dim3 extent) {
  const int64_t x = linear % extent.x, rest = linear / extent.x;
  return Dim3(static_cast<unsigned>(x), static_cast<unsigned>(rest % extent.y),
              static_cast<unsigned>(rest / extent.y));
}

int64_t volume(Dim3 d) { return int64_t{d.x} * d.y * d.z; }

// Adds one group width's requests: records sorted so that each request's
// accesses (same kind, lane group, site and occurrence) are adjacent and in
// address order.
void add_requests(std::vector<AccessRecord>& records, uint32_t width, Traffic* traffic,
                  Coalescing Traffic::*field) {
  const auto key = [width](const AccessRecord& r) {
    return std::make_tuple(r.kind, r.lane / width, r.file, r.line, r.occurrence);
  };
  std::sort(records.begin(), records.end(), [&](const AccessRecord& a, const AccessRecord& b) {
    const auto ka = key(a), kb = key(b);
    return ka != kb ? ka < kb : a.address < b.address;
  });
  for (size_t begin = 0; begin < records.size();) {
    size_t end = begin;
    uintptr_t covered = 0;  // bytes below this address are counted
    int64_t distinct = 0, sectors = 0, last_sector = -1;
    for (; end < records.size() && key(records[end]) == key(records[begin]); ++end) {
      const AccessRecord& r = records[end];
      const uintptr_t stop = r.address + r.bytes;
      if (stop > std::max(covered, r.address)) distinct += stop - std::max(covered, r.address);
      covered = std::max(covered, stop);
      const int64_t first = std::max<int64_t>(r.address / kSectorBytes, last_sector + 1);
      const int64_t last = static_cast<int64_t>((stop - 1) / kSectorBytes);
      if (last >= first) sectors += last - first + 1;
      last_sector = std::max(last_sector, last);
    }
    Coalescing& c = traffic[static_cast<int>(records[begin].kind)].*field;
    ++c.requests;
    c.sectors += sectors;
    c.min_sectors += (distinct + kSectorBytes - 1) / kSectorBytes;
    begin = end;
  }
}

// Distinct bytes of a list of (address, bytes), sorted and deduplicated in place.
int64_t distinct_bytes(std::vector<std::pair<uintptr_t, uint32_t>>& accesses) {
  std::sort(accesses.begin(), accesses.end());
  accesses.erase(std::unique(accesses.begin(), accesses.end()), accesses.end());
  int64_t bytes = 0;
  uintptr_t covered = 0;
  for (const auto& [address, size] : accesses) {
    const uintptr_t stop = address + size;
    if (stop > std::max(covered, address)) bytes += stop - std::max(covered, address);
    covered = std::max(covered, stop);
  }
  return bytes;
}

// What one launch's blocks accessed, filled block by block.
struct LaunchLog {
  std::mutex mutex;
  LaunchRecord record;
  std::vector<std::pair<uintptr_t, uint32_t>> addresses[2];  // loads, stores

  void add_block(std::vector<AccessRecord>& records) {
    Traffic traffic[2];
    add_requests(records, 32, traffic, &Traffic::warp);
    add_requests(records, 64, traffic, &Traffic::wavefront);
    std::lock_guard<std::mutex> lock(mutex);
    for (const AccessRecord& r : records) {
      Traffic& t = r.kind == Access::load ? record.load : record.store;
      ++t.accesses;
      t.bytes += r.bytes;
      addresses[static_cast<int>(r.kind)].emplace_back(r.address, r.bytes);
    }
    for (int kind = 0; kind < 2; ++kind) {
      Traffic& t = kind == 0 ? record.load : record.store;
      for (Coalescing Traffic::*field : {&Traffic::warp, &Traffic::wavefront}) {
        (t.*field).requests += (traffic[kind].*field).requests;
        (t.*field).sectors += (traffic[kind].*field).sectors;
        (t.*field).min_sectors += (traffic[kind].*field).min_sectors;
      }
    }
    records.clear();
  }
};

struct Session {
  std::mutex mutex;
  Recording recording;
  std::vector<std::pair<uintptr_t, uint32_t>> addresses[2];
};
std::mutex session_mutex;
std::atomic<Session*> session{nullptr};

std::mutex synchronized_launch;

// Runs lane `linear` of the current block on this thread.
void run_lane(int64_t linear, Dim3 block, const LaneBody& body, LaneLog* log) {
  lane.thread = unravel(linear, block);
  if (log != nullptr) {
    log->lane = static_cast<uint32_t>(linear);
    log->sites.clear();
  }
  body();
}

void enter_block(int64_t b, Dim3 grid, Dim3 block) {
  lane.block = unravel(b, grid);
  lane.block_dim = block;
  lane.grid_dim = grid;
}

void run_independent(const KernelLabel& label, Dim3 grid, Dim3 block, const LaneBody& body,
                     LaunchLog* launch) {
  const int64_t blocks = volume(grid), lanes = volume(block);
  std::atomic<int64_t> next{0};
  const auto worker = [&] {
    block_context = {&label, nullptr};
    LaneLog log;
    lane_log = launch != nullptr ? &log : nullptr;
    for (int64_t b = next++; b < blocks; b = next++) {
      enter_block(b, grid, block);
      for (int64_t t = 0; t < lanes; ++t) run_lane(t, block, body, lane_log);
      if (launch != nullptr) launch->add_block(log.records);
    }
    lane_log = nullptr;
    block_context = {};
  };
  const int64_t threads = std::min<int64_t>(blocks, hardware_threads());
  std::vector<std::thread> helpers;
  for (int64_t i = 1; i < threads; ++i) helpers.emplace_back(worker);
  worker();
  for (std::thread& h : helpers) h.join();
}

#if BWDCONV_LANES_AS_THREADS
// The lanes' threads, kept from launch to launch: creating a block's 255
// threads at every launch took most of the sanitizer suites' time.
class LaneThreads {
 public:
  using LaneThread = std::function<void(int64_t)>;

  // lane_thread(t) for every lane t: lane 0 on the calling thread, the
  // others on the kept threads; returns when all have returned.
  void run(int64_t lanes, const LaneThread& lane_thread) {
    std::unique_lock<std::mutex> lock(mutex_);
    for (; threads_ < lanes - 1; ++threads_) {
      std::thread([this, lane = threads_ + 1] { serve(lane); }).detach();
    }
    job_ = &lane_thread;
    lanes_ = lanes;
    pending_ = lanes - 1;
    ++generation_;
    started_.notify_all();
    lock.unlock();
    lane_thread(0);
    lock.lock();
    finished_.wait(lock, [&] { return pending_ == 0; });
  }

 private:
  void serve(int64_t lane) {
    uint64_t seen = 0;
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      started_.wait(lock, [&] { return generation_ != seen; });
      seen = generation_;
      if (lane >= lanes_) continue;
      const LaneThread* job = job_;
      lock.unlock();
      (*job)(lane);
      lock.lock();
      if (--pending_ == 0) finished_.notify_one();
    }
  }

  std::mutex mutex_;
  std::condition_variable started_, finished_;
  const LaneThread* job_ = nullptr;
  int64_t threads_ = 0, lanes_ = 0, pending_ = 0;
  uint64_t generation_ = 0;
};

// Never destroyed: its threads wait for work until the process ends.
LaneThreads& lane_threads() {
  static LaneThreads* pool = new LaneThreads();
  return *pool;
}

void run_synchronized(const KernelLabel& label, Dim3 grid, Dim3 block, const LaneBody& body,
                      LaunchLog* launch) {
  std::lock_guard<std::mutex> one_at_a_time(synchronized_launch);
  const int64_t blocks = volume(grid), lanes = volume(block);
  SyncPoint barrier(static_cast<int>(lanes));
  std::mutex records_mutex;
  std::vector<AccessRecord> block_records;
  const LaneThreads::LaneThread lane_thread = [&](int64_t t) {
    block_context = {&label, &barrier};
    LaneLog log;
    lane_log = launch != nullptr ? &log : nullptr;
    for (int64_t b = 0; b < blocks; ++b) {
      enter_block(b, grid, block);
      run_lane(t, block, body, lane_log);
      if (launch != nullptr) {
        {
          std::lock_guard<std::mutex> lock(records_mutex);
          block_records.insert(block_records.end(), log.records.begin(), log.records.end());
        }
        log.records.clear();
        barrier.arrive_and_wait();
        if (t == 0) launch->add_block(block_records);
      }
      // The block is over for every lane before the next one reuses __shared__.
      barrier.arrive_and_wait();
    }
    lane_log = nullptr;
    block_context = {};
  };
  lane_threads().run(lanes, lane_thread);
}

#else
void run_synchronized(const KernelLabel& label, Dim3 grid, Dim3 block, const LaneBody& body,
                      LaunchLog* launch) {
  std::lock_guard<std::mutex> one_at_a_time(synchronized_launch);
  const int64_t blocks = volume(grid), lanes = volume(block);
  SyncPoint barrier(static_cast<int>(lanes));
  std::vector<LaneLog> logs(launch != nullptr ? lanes : 0);
  std::vector<AccessRecord> block_records;
  block_context = {&label, &barrier};
  const SyncPoint::Resume lane_body = [&](int64_t t) {
    run_lane(t, block, body, launch != nullptr ? &logs[t] : nullptr);
  };
  // A lane's builtin indices and log are the thread's: set before each resume.
  const SyncPoint::Resume before_resume = [&](int64_t t) {
    lane.thread = unravel(t, block);
    lane_log = launch != nullptr ? &logs[t] : nullptr;
  };
  for (int64_t b = 0; b < blocks; ++b) {
    enter_block(b, grid, block);
    barrier.run_block(lane_body, before_resume, label.name);
    if (launch == nullptr) continue;
    for (LaneLog& log : logs) {
      block_records.insert(block_records.end(), log.records.begin(), log.records.end());
      log.records.clear();
    }
    launch->add_block(block_records);
  }
  lane_log = nullptr;
  block_context = {};
}

#endif

}  // namespace

void run_grid(const KernelLabel& label, Dim3 grid, Dim3 block, LaneBody body) {
  if (volume(grid) == 0 || volume(block) == 0) return;
  // A recording stays on until the launch it sees is recorded.
  std::unique_lock<std::mutex> recording(session_mutex);
  Session* s = session.load();
  if (s == nullptr) recording.unlock();
  LaunchLog launch;
  launch.record.kernel = label.name;
  launch.record.blocks = volume(grid);
  launch.record.lanes_per_block = volume(block);
  LaunchLog* log = s != nullptr ? &launch : nullptr;
  if (label.lanes == Lanes::synchronized) {
    run_synchronized(label, grid, block, body, log);
  } else {
    run_independent(label, grid, block, body, log);
  }
  if (s == nullptr) return;
  for (int kind = 0; kind < 2; ++kind) {
    Traffic& t = kind == 0 ? launch.record.load : launch.record.store;
    t.distinct_bytes = distinct_bytes(launch.addresses[kind]);
    s->addresses[kind].insert(s->addresses[kind].end(), launch.addresses[kind].begin(),
                              launch.addresses[kind].end());
  }
  s->recording.launches.push_back(std::move(launch.record));
}

void misaligned_access(Access kind, const void* address, size_t alignment, const char* file,
                       int line) {
  std::fprintf(stderr,
               "bwdconv host grid: misaligned %s at %p (%s:%d): a GPU needs %zu-byte "
               "alignment for it\n",
               kind == Access::load ? "load" : "store", address, file, line, alignment);
  std::abort();
}

void sync_threads() {
  if (block_context.barrier == nullptr) {
    std::fprintf(stderr,
                 "bwdconv host grid: kernel %s calls __syncthreads but was launched with "
                 "Lanes::independent\n",
                 block_context.label != nullptr ? block_context.label->name : "?");
    std::abort();
  }
  block_context.barrier->arrive_and_wait();
}

void start_recording() {
  std::lock_guard<std::mutex> lock(session_mutex);
  if (session.load() == nullptr) session.store(new Session);
}

Recording stop_recording() {
  std::lock_guard<std::mutex> lock(session_mutex);
  Session* s = session.exchange(nullptr);
  if (s == nullptr) return {};
  Recording recording = std::move(s->recording);
  recording.distinct_load_bytes = distinct_bytes(s->addresses[0]);
  recording.distinct_store_bytes = distinct_bytes(s->addresses[1]);
  delete s;
  return recording;
}

}  // namespace bwdconv::hip::host
