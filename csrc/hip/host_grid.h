// The host target's grid executor (portability.h, "host target"): runs every
// block of a launch on CPU threads and can record the kernels' global
// accesses. Plain C++; nothing here knows CUDA or HIP.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "portability.h"

// A synchronized block's lanes run as threads where a sanitizer watches them
// (ThreadSanitizer must see each lane as a thread to report a race between
// lanes; AddressSanitizer does not follow stacks switched under it), and as
// fibers on the launching thread everywhere else: a barrier is then a switch
// of stacks, where 256 threads would each be woken by the kernel at every
// barrier and created at every launch (docs/host-target.md).
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define BWDCONV_LANES_AS_THREADS 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define BWDCONV_LANES_AS_THREADS 1
#endif
#endif
#ifndef BWDCONV_LANES_AS_THREADS
#define BWDCONV_LANES_AS_THREADS 0
#endif

namespace bwdconv::hip::host {

struct Dim3 {
  unsigned x, y, z;
  constexpr Dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

// The builtin indices (threadIdx, blockIdx, blockDim, gridDim) of the lane
// the calling thread runs.
struct LanePosition {
  Dim3 thread, block, block_dim, grid_dim;
};
inline thread_local LanePosition lane;

// A kernel bound to its arguments: called once per lane.
class LaneBody {
 public:
  template <typename F>
  explicit LaneBody(const F& f)
      : context_(&f), call_([](const void* c) { (*static_cast<const F*>(c))(); }) {}
  void operator()() const { call_(context_); }

 private:
  const void* context_;
  void (*call_)(const void*);
};

// Runs every block of `grid` with `block` lanes each, and returns when all
// are done.
//   - Lanes::independent: each block's lanes run in order on one thread;
//     blocks run in parallel on up to hardware_concurrency threads.
//   - Lanes::synchronized: a block's lanes run as concurrent threads that
//     meet at __syncthreads (a real barrier), or as fibers that switch there
//     (BWDCONV_LANES_AS_THREADS); blocks run one after the other,
//     and one synchronized launch runs at a time in the process, so that a
//     kernel's __shared__ arrays serve the one block that runs.
void run_grid(const KernelLabel& label, Dim3 grid, Dim3 block, LaneBody body);

// __syncthreads: the block's barrier. Aborts, naming the kernel, when the
// kernel was launched with independent lanes.
void sync_threads();

enum class Access : int { load = 0, store = 1 };

struct LaneLog;
// The calling thread's log while a recording is on (start_recording).
inline thread_local LaneLog* lane_log = nullptr;
void append_access(LaneLog& log, Access kind, const void* address, size_t bytes,
                   const char* file, int line);

// Reports an access whose address is not a multiple of its alignment and
// aborts: a GPU faults on it ("misaligned address"), where the host would
// not notice.
[[noreturn]] void misaligned_access(Access kind, const void* address, size_t alignment,
                                    const char* file, int line);

// global_load/global_store (portability.h) call this for every access. It
// checks the address against the access's alignment, as a GPU does; while a
// recording is on, the site (kind, file, line) and how often this lane has
// reached it identify the instruction that the lanes of one warp execute
// together.
inline void record_access(Access kind, const void* address, size_t bytes, size_t alignment,
                          const char* file, int line) {
  if (reinterpret_cast<uintptr_t>(address) % alignment != 0) {
    misaligned_access(kind, address, alignment, file, line);
  }
  if (lane_log != nullptr) append_access(*lane_log, kind, address, bytes, file, line);
}

// Coalescing of one kind of access over a launch: the lanes of each group
// (a warp of 32 or a wavefront of 64 consecutive lanes of a block) that
// execute one access site together form one request; it touches `sectors`
// 32-byte sectors where `min_sectors` = ceil(distinct bytes / 32) would hold
// the bytes it moves.
struct Coalescing {
  int64_t requests = 0;
  int64_t sectors = 0;
  int64_t min_sectors = 0;
};

struct Traffic {
  int64_t accesses = 0;
  int64_t bytes = 0;           // moved, counting every access
  int64_t distinct_bytes = 0;  // at distinct addresses: bytes - distinct_bytes were moved again
  Coalescing warp;             // 32 lanes
  Coalescing wavefront;        // 64 lanes
};

struct LaunchRecord {
  std::string kernel;
  int64_t blocks = 0;
  int64_t lanes_per_block = 0;
  Traffic load, store;
};

struct Recording {
  std::vector<LaunchRecord> launches;
  // Distinct bytes over all launches: with several launches writing one
  // tensor, stores' bytes == distinct_store_bytes says no byte was written twice.
  int64_t distinct_load_bytes = 0;
  int64_t distinct_store_bytes = 0;
};

// Records every host-grid launch of the process from now on (one recording
// at a time) until stop_recording, which returns what the launches accessed.
void start_recording();
Recording stop_recording();

}  // namespace bwdconv::hip::host
