// The csrc/hip kernels themselves, run on the host grid (portability.h, "host
// target"), against references written with plain loops. Small integer values
// keep every sum exact, so results must be equal in any summation order. The
// sanitizer builds (CMakeLists.txt) run this file too.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "hip/launch.h"
#include "hip/host_grid.h"
#include "hip/interleave.h"
#include "hip/layout.h"
#include "hip/scatter.h"
#include "block_reverse.h"
#include "dense_views.h"

namespace bwdconv::hip {
namespace {

using test_views::dense_strides;
using test_views::offset_of;
using test_views::view_of;

int64_t element_count_of(const std::vector<int64_t>& sizes) {
  int64_t count = 1;
  for (const int64_t s : sizes) count *= s;
  return count;
}

// Calls f(coords) for every index of `sizes`, last dim fastest.
template <typename F>
void for_each_index(const std::vector<int64_t>& sizes, F&& f) {
  std::vector<int64_t> coords(sizes.size(), 0);
  if (element_count_of(sizes) == 0) return;
  while (true) {
    f(coords);
    int d = static_cast<int>(sizes.size()) - 1;
    for (; d >= 0 && ++coords[d] == sizes[d]; --d) coords[d] = 0;
    if (d < 0) return;
  }
}

std::vector<float> small_integers(int64_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<float> values(count);
  for (float& v : values) v = static_cast<float>(static_cast<int>(rng() % 9) - 4);
  return values;
}

// Elements from a view's first to one past its last.
int64_t span_of(const TensorView& view) {
  int64_t last = 0;
  for (int d = 0; d < view.dims; ++d) last += (view.sizes[d] - 1) * view.strides[d];
  return last + 1;
}

// The zero-inserted, padded buffer of `src` as raw bytes, the slow way; bytes
// of dst's span that no element covers stay `untouched`.
std::vector<unsigned char> reference_scatter(const std::vector<unsigned char>& src,
                                             const TensorView& src_view, const TensorView& dst_view,
                                             const int64_t* stride, const int64_t* lead,
                                             int element_bytes, unsigned char untouched) {
  std::vector<int64_t> dst_sizes(dst_view.sizes, dst_view.sizes + dst_view.dims);
  std::vector<unsigned char> dst(span_of(dst_view) * element_bytes, untouched);
  for_each_index(dst_sizes, [&](const std::vector<int64_t>& j) {
    std::vector<int64_t> o(j);
    bool value = true;
    for (size_t i = 0; i + 2 < j.size(); ++i) {
      const int64_t shifted = j[2 + i] - lead[i];
      o[2 + i] = shifted / stride[i];
      value = value && shifted >= 0 && shifted % stride[i] == 0 &&
              o[2 + i] < src_view.sizes[2 + i];
    }
    unsigned char* at = &dst[offset_of(dst_view, j) * element_bytes];
    if (value) {
      memcpy(at, &src[offset_of(src_view, o) * element_bytes], element_bytes);
    } else {
      memset(at, 0, element_bytes);
    }
  });
  return dst;
}

// A scatter's shape: src and dst sizes, the stride and lead per spatial dim.
struct ScatterShape {
  std::vector<int64_t> src_sizes, dst_sizes;
  int64_t stride[3] = {1, 1, 1}, lead[3] = {};
  bool channels_last = false;
  int64_t gap = 0;  // unused elements after each run of dst's fastest dim
  int element_bytes = 4;

  // Spatial dim `i`: `outputs` source positions `step` apart in dst after a
  // lead of -1..3, and a crop of -1..3 past the last.
  void add_dim(int i, int64_t outputs, int64_t step, std::mt19937& rng) {
    stride[i] = step;
    lead[i] = static_cast<int64_t>(rng() % 5) - 1;
    const int64_t trail = static_cast<int64_t>(rng() % 5) - 1;
    src_sizes.push_back(outputs);
    dst_sizes.push_back(std::max<int64_t>((outputs - 1) * step + 1 + lead[i] + trail, 1));
  }
};

// Random 1-3D buffers (strides 1-4, leads -1..3, crops), 2-, 4- and 8-byte
// elements, NCHW and channels_last, dense or with gaps after each row;
// rows long enough, at times, that a dense walk's thread stays in a row from
// one of its chunks to the next (kRunLanes chunks on).
ScatterShape random_scatter(std::mt19937& rng, int trial) {
  ScatterShape s;
  const int spatial = 1 + static_cast<int>(rng() % 3);
  s.channels_last = rng() % 2;
  s.element_bytes = 2 << (rng() % 3);
  const bool long_rows = spatial == 1 && rng() % 2;
  s.src_sizes = {1 + static_cast<int64_t>(rng() % 3),
                 1 + static_cast<int64_t>(rng() % (long_rows && s.channels_last ? 1200 : 9))};
  s.dst_sizes = s.src_sizes;
  for (int i = 0; i < spatial; ++i) {
    const int64_t outputs = 1 + rng() % (long_rows && !s.channels_last ? 400 : 9);
    const int64_t step = 1 + rng() % 4;
    s.add_dim(i, outputs, step, rng);
  }
  s.gap = trial % 3 == 2 ? 1 + static_cast<int64_t>(rng() % 3) : 0;
  return s;
}

// Launches the scatter of a random src into dst (base addresses off 16-byte
// boundaries) with the walk `configure` leaves in the params, and checks every
// byte of the buffer against the reference, nothing written outside.
template <typename Configure>
void check_scatter(const ScatterShape& s, std::mt19937& rng, const std::string& where,
                   Configure configure) {
  const TensorView src_view = view_of(s.src_sizes, s.channels_last);
  const TensorView dst_view = view_of(s.dst_sizes, s.channels_last, s.gap);
  const int64_t src_bytes = element_count_of(s.src_sizes) * s.element_bytes;
  const int64_t dst_bytes = span_of(dst_view) * s.element_bytes;
  std::vector<unsigned char> src_storage(src_bytes + 32), dst_storage(dst_bytes + 32, 0xab);
  for (unsigned char& b : src_storage) b = static_cast<unsigned char>(rng());
  const int64_t src_shift = (rng() % 8) * s.element_bytes % 16;
  const int64_t dst_shift = (rng() % 8) * s.element_bytes % 16;
  const std::vector<unsigned char> src(src_storage.begin() + src_shift,
                                       src_storage.begin() + src_shift + src_bytes);
  ScatterParams p;
  p.src = src_storage.data() + src_shift;
  p.dst = dst_storage.data() + dst_shift;
  ASSERT_TRUE(make_scatter_walk(src_view, dst_view, s.stride, s.lead, s.element_bytes, &p))
      << where;
  configure(p);
  ASSERT_EQ(launch_scatter<Target::host>(p, nullptr), nullptr) << where;
  const std::vector<unsigned char> expected =
      reference_scatter(src, src_view, dst_view, s.stride, s.lead, s.element_bytes, 0xab);
  for (int64_t b = 0; b < static_cast<int64_t>(dst_storage.size()); ++b) {
    const bool inside = b >= dst_shift && b < dst_shift + dst_bytes;
    ASSERT_EQ(dst_storage[b], inside ? expected[b - dst_shift] : 0xab) << where << " byte " << b;
  }
}

// The row walk and the dense walk (1-6 chunks per thread) on random
// scatters (random_scatter).
TEST(HostScatter, WritesTheZeroInsertedPaddedBuffer) {
  std::mt19937 rng(2026);
  int walks[2] = {0, 0};  // row walks, dense walks
  int carried = 0;        // dense walks whose rows span more than a run's pass
  for (int trial = 0; trial < 600; ++trial) {
    const ScatterShape s = random_scatter(rng, trial);
    check_scatter(s, rng, "trial " + std::to_string(trial), [&](ScatterParams& p) {
      // a dense walk's chunks per thread (0: the launcher's)
      p.passes = static_cast<int>(rng() % 7);
      ++walks[p.dense];
      carried += p.dense && p.row.size.value > kRunLanes * 16u / s.element_bytes;
    });
    if (HasFatalFailure()) return;
  }
  EXPECT_GE(walks[0], 150);
  EXPECT_GE(walks[1], 350);
  EXPECT_GE(carried, 20);
}

// An access whose address is not a multiple of its alignment (a 16-byte
// vector 8 bytes off, a float 2 bytes off) aborts the host grid as it would
// fault on a GPU; an aligned one passes.
TEST(HostGridDeathTest, MisalignedAccessAborts) {
  alignas(16) static uint8_t bytes[64];
  host::record_access(host::Access::load, bytes + 16, 16, 16, "aligned.cu", 1);
  EXPECT_DEATH(host::record_access(host::Access::load, bytes + 8, 16, 16, "vector.cu", 2),
               "misaligned load at .* \\(vector.cu:2\\): a GPU needs 16-byte alignment");
  EXPECT_DEATH(host::record_access(host::Access::store, bytes + 2, 4, 4, "float.cu", 3),
               "misaligned store at .* \\(float.cu:3\\): a GPU needs 4-byte alignment");
}

// A block whose lanes do not all reach __syncthreads: where lanes are fibers
// the host grid aborts, naming the kernel, where a GPU's behaviour is
// undefined (threads would wait at the barrier for ever).
TEST(HostGridDeathTest, LanesReturningWhileOthersWaitAtTheBarrierAbort) {
  if (BWDCONV_LANES_AS_THREADS) GTEST_SKIP() << "lanes run as threads under a sanitizer";
  const auto body = [] {
    if (host::lane.thread.x != 0) host::sync_threads();
  };
  EXPECT_DEATH(host::run_grid({"divergent_barrier", Lanes::synchronized}, host::Dim3(2),
                              host::Dim3(4), host::LaneBody(body)),
               "kernel divergent_barrier: lanes returned while others wait at __syncthreads");
}

// A load and a store written on one source line, as in
// global_store(dst + i, odd ? zero : global_load(src + i)), where only some
// lanes load: the store is one instruction for the whole warp, so each warp's
// 32 consecutive 4-byte stores are one request of 4 sectors, whichever lanes
// also loaded.
TEST(HostGridRecording, ALoadAndAStoreOnOneLineAreTwoSites) {
  alignas(64) static float src[64], dst[64];
  static const char* const kFile = "one_line.cu";
  const auto body = [&] {
    const unsigned i = host::lane.thread.x;
    constexpr size_t bytes = sizeof(float), alignment = alignof(float);
    if (i % 2 == 0) host::record_access(host::Access::load, &src[i], bytes, alignment, kFile, 7);
    host::record_access(host::Access::store, &dst[i], bytes, alignment, kFile, 7);
  };
  host::start_recording();
  host::run_grid({"load_and_store_on_one_line"}, host::Dim3(1), host::Dim3(64),
                 host::LaneBody(body));
  const host::Recording recording = host::stop_recording();
  ASSERT_EQ(recording.launches.size(), 1u);
  const host::Traffic& stores = recording.launches[0].store;
  EXPECT_EQ(stores.bytes, static_cast<int64_t>(sizeof dst));
  EXPECT_EQ(stores.warp.requests, 2);
  EXPECT_EQ(stores.warp.sectors, 8);
  EXPECT_EQ(stores.warp.min_sectors, 8);
  EXPECT_EQ(recording.launches[0].load.warp.requests, 2);
}

// The recorded traffic of a scatter whose rows are all interior chunks
// (stride 2, lead -1, 17 values: the 32-element rows hold 0, dy[1], 0, ...,
// dy[16]), into a 64-byte aligned buffer: each element stored once, in 16-byte stores, and
// each warp's stores in the 16 sectors that hold its 512 bytes.
TEST(HostGridRecording, InteriorChunkStoresAreCoalescedAndWrittenOnce) {
  const std::vector<int64_t> src_sizes{1, 2, 16, 17}, dst_sizes{1, 2, 16, 32};
  const std::vector<float> src = small_integers(element_count_of(src_sizes), 2);
  alignas(64) static float dst[2 * 16 * 32];
  const int64_t stride[2] = {1, 2}, lead[2] = {0, -1};
  ScatterParams p;
  p.src = src.data();
  p.dst = dst;
  ASSERT_TRUE(make_scatter_walk(view_of(src_sizes, false), view_of(dst_sizes, false), stride,
                                lead, sizeof(float), &p));
  host::start_recording();
  ASSERT_EQ(launch_scatter<Target::host>(p, nullptr), nullptr);
  const host::Recording recording = host::stop_recording();
  ASSERT_EQ(recording.launches.size(), 1u);
  const host::Traffic& stores = recording.launches[0].store;
  EXPECT_EQ(stores.bytes, static_cast<int64_t>(sizeof dst));
  EXPECT_EQ(stores.distinct_bytes, static_cast<int64_t>(sizeof dst));
  EXPECT_EQ(stores.accesses, static_cast<int64_t>(sizeof dst / 16));
  EXPECT_EQ(stores.warp.requests, static_cast<int64_t>(sizeof dst / (32 * 16)));
  EXPECT_EQ(stores.warp.sectors, stores.warp.requests * 16);
  EXPECT_EQ(stores.warp.min_sectors, stores.warp.sectors);
}

// A random interleave: dx (NCHW or channels_last, base off 16-byte
// boundaries, dense or with `gap` unused elements after each row), a convolution's stride and padding, and per phase a Copy
// result (any dense or gapped layout, extents shorter or longer than the
// slots, channels mapped through groups as phase_stacked stacks them), a
// Zero or a Keep.
struct InterleaveCase {
  std::vector<int64_t> dx_sizes;
  bool channels_last = false;
  int64_t gap = 0;
  int element_bytes = 4;
  int64_t stride[3] = {1, 1, 1}, padding[3] = {};
  int64_t groups = 1, per_group = 1, stacked = 1;
  std::vector<PhaseWrite> writes;
  std::vector<std::vector<int64_t>> result_sizes, result_strides;
  std::vector<int64_t> channel_offset;  // a phase's first channel in its result
  std::vector<std::vector<unsigned char>> results;
  int spatial() const { return static_cast<int>(dx_sizes.size()) - 2; }
  int phases() const { return static_cast<int>(writes.size()); }
};

// Strides of `sizes` in a random dim order, some with gaps.
std::vector<int64_t> random_strides(const std::vector<int64_t>& sizes, std::mt19937& rng) {
  std::vector<int> order(sizes.size());
  for (size_t d = 0; d < order.size(); ++d) order[d] = static_cast<int>(d);
  if (rng() % 2) std::shuffle(order.begin(), order.end(), rng);
  std::vector<int64_t> strides(sizes.size());
  int64_t stride = 1;
  for (auto d = order.rbegin(); d != order.rend(); ++d) {
    strides[*d] = stride;
    stride *= std::max<int64_t>(sizes[*d], 1) + (rng() % 4 == 0 ? 1 : 0);
  }
  return strides;
}

// How add_phases lays a phase's result out.
enum class ResultLayout { random, nchw, channels_last };

// The phases of `c`, whose dx, strides and padding are chosen: per phase a
// write (a Keep only where `keeps`), a result whose extents are shorter or
// longer than the slots, laid out at random (random_strides), dense NCHW
// or dense channels_last, and random bytes.
void add_phases(InterleaveCase& c, std::mt19937& rng, bool keeps, ResultLayout layout) {
  int phases = 1;
  for (int i = 0; i < c.spatial(); ++i) phases *= static_cast<int>(c.stride[i]);
  for (int e = 0; e < phases; ++e) {
    const unsigned kind = rng() % 10;
    c.writes.push_back(kind < 7 ? PhaseWrite::Copy
                       : kind < 9 || !keeps ? PhaseWrite::Zero
                                            : PhaseWrite::Keep);
    std::vector<int64_t> sizes{c.dx_sizes[0], c.groups * c.stacked * c.per_group};
    for (int i = 0; i < c.spatial(); ++i) {
      const int64_t slots = (c.dx_sizes[2 + i] - 1 + c.padding[i]) / c.stride[i] + 1;
      sizes.push_back(std::max<int64_t>(slots + static_cast<int64_t>(rng() % 5) - 3, 0));
    }
    // Grouped channel maps come from phase_stacked, whose phases share one result.
    const bool shared = c.groups > 1 && e > 0;
    c.result_sizes.push_back(shared ? c.result_sizes[0] : sizes);
    c.result_strides.push_back(shared ? c.result_strides[0]
                               : layout == ResultLayout::random
                                   ? random_strides(sizes, rng)
                                   : dense_strides(sizes, layout == ResultLayout::channels_last));
    c.channel_offset.push_back(static_cast<int64_t>(rng() % c.stacked) * c.per_group);
    int64_t last = 0;
    for (size_t d = 0; d < sizes.size(); ++d) {
      last += std::max<int64_t>(c.result_sizes.back()[d] - 1, 0) * c.result_strides.back()[d];
    }
    std::vector<unsigned char> bytes((last + 1) * c.element_bytes + 16);
    for (unsigned char& b : bytes) b = static_cast<unsigned char>(rng());
    c.results.push_back(std::move(bytes));
  }
}

InterleaveCase random_interleave(std::mt19937& rng) {
  InterleaveCase c;
  const int spatial = 1 + static_cast<int>(rng() % 3);
  c.channels_last = rng() % 2;
  c.gap = rng() % 3 == 0 ? 1 + static_cast<int64_t>(rng() % 3) : 0;
  c.element_bytes = 2 << (rng() % 3);
  c.groups = 1 + rng() % 3;
  // one spatial dim: rows long enough, at times, that a dense walk's thread
  // stays in a row from one of its chunks to the next (kRunLanes chunks on)
  const bool long_rows = spatial == 1 && rng() % 2;
  c.per_group = 1 + rng() % (c.channels_last ? (long_rows ? 400 : 24) : 4);
  c.stacked = c.groups > 1 ? 1 + rng() % 3 : 1;
  c.dx_sizes = {static_cast<int64_t>(1 + rng() % 3), c.groups * c.per_group};
  for (int i = 0; i < spatial; ++i) {
    const bool row = i == spatial - 1 && !c.channels_last;
    c.dx_sizes.push_back(1 + rng() % (row ? (long_rows ? 1200 : 40) : 7));
    c.stride[i] = 1 + rng() % (spatial == 3 ? 4 : 3);
    c.padding[i] = rng() % 4;
  }
  add_phases(c, rng, true, ResultLayout::random);
  return c;
}

// A random NCHW interleave whose rows are short (shorter than a chunk) and
// padded, of stride 1, beside a longer stride-2 dim: rows the H200 found
// written from the wrong slots (a walk since removed read slots from 0, not
// from the padding), in 2-, 4- and 8-byte elements, results dense NCHW.
InterleaveCase short_padded_rows(std::mt19937& rng) {
  InterleaveCase c;
  const int spatial = 2 + static_cast<int>(rng() % 2);
  c.element_bytes = 2 << (rng() % 3);
  c.groups = 1 + rng() % 2;
  c.per_group = 1 + rng() % 3;
  c.dx_sizes = {static_cast<int64_t>(1 + rng() % 2), c.groups * c.per_group};
  for (int i = 0; i < spatial; ++i) {
    const bool row = i == spatial - 1, along = i == spatial - 2;
    const int64_t short_row = std::max<int64_t>(16 / c.element_bytes - 1, 1);
    c.dx_sizes.push_back(row ? 1 + rng() % short_row : along ? 20 + rng() % 40 : 1 + rng() % 4);
    c.stride[i] = row ? 1 : along ? 2 : 1 + rng() % 3;
    c.padding[i] = row ? 1 + rng() % 3 : rng() % 4;
  }
  add_phases(c, rng, false, ResultLayout::nchw);
  return c;
}

std::string describe(const InterleaveCase& c) {
  const auto list = [](const std::vector<int64_t>& v) {
    std::string text;
    for (const int64_t x : v) text += " " + std::to_string(x);
    return text;
  };
  std::string text = "dx" + list(c.dx_sizes) + (c.channels_last ? " channels_last" : " nchw") +
                     " gap " + std::to_string(c.gap) + ", " + std::to_string(c.element_bytes) + "-byte, stride/padding";
  for (int i = 0; i < c.spatial(); ++i) {
    text += " " + std::to_string(c.stride[i]) + "/" + std::to_string(c.padding[i]);
  }
  text += ", groups " + std::to_string(c.groups) + " x " + std::to_string(c.per_group) +
          " stacked " + std::to_string(c.stacked);
  for (int e = 0; e < c.phases(); ++e) {
    text += "\n phase " + std::to_string(e) + " write " +
            std::to_string(static_cast<int>(c.writes[e])) + " sizes" + list(c.result_sizes[e]) +
            " strides" + list(c.result_strides[e]);
  }
  return text;
}

// The launch for phases [first, first + count).
InterleaveLaunch interleave_launch(const InterleaveCase& c, void* dx, int first, int count,
                                   bool wide) {
  InterleaveLaunch l;
  l.dst = dx;
  l.dst_view = view_of(c.dx_sizes, c.channels_last, c.gap);
  for (int i = 0; i < c.spatial(); ++i) {
    l.stride[i] = c.stride[i];
    l.padding[i] = c.padding[i];
  }
  l.channels_per_group = c.per_group;
  l.first_phase = first;
  l.phase_count = count;
  l.element_bytes = c.element_bytes;
  l.wide_offsets = wide;
  for (int e = 0; e < count; ++e) {
    const int phase = first + e;
    PhaseResult& r = l.phases[e];
    r.write = c.writes[phase];
    const std::vector<int64_t>& strides = c.result_strides[phase];
    r.data = c.results[phase].data() + c.channel_offset[phase] * strides[1] * c.element_bytes;
    for (size_t d = 0; d < c.dx_sizes.size(); ++d) {
      r.sizes[d] = c.result_sizes[phase][d];
      r.strides[d] = strides[d];
    }
    l.group_stride = c.stacked * c.per_group * strides[1];
  }
  return l;
}

// dx after every launch, the slow way: dx[n, ch, i...] is slot
// q = (i + p) div s of phase r = (i + p) mod s (row-major); a Copy phase's
// result element, a zero past its extent or for a Zero phase, untouched for
// a Keep phase.
std::vector<unsigned char> reference_interleave(const InterleaveCase& c,
                                                std::vector<unsigned char> dx) {
  const TensorView view = view_of(c.dx_sizes, c.channels_last, c.gap);
  for_each_index(c.dx_sizes, [&](const std::vector<int64_t>& i) {
    int64_t phase = 0;
    std::vector<int64_t> q(i.size());
    for (int d = 0; d < c.spatial(); ++d) {
      q[2 + d] = (i[2 + d] + c.padding[d]) / c.stride[d];
      phase = phase * c.stride[d] + (i[2 + d] + c.padding[d]) % c.stride[d];
    }
    const PhaseWrite write = c.writes[phase];
    if (write == PhaseWrite::Keep) return;
    unsigned char* to = &dx[offset_of(view, i) * c.element_bytes];
    std::memset(to, 0, c.element_bytes);
    if (write != PhaseWrite::Copy) return;
    const std::vector<int64_t>& sizes = c.result_sizes[phase];
    const std::vector<int64_t>& strides = c.result_strides[phase];
    int64_t offset = (c.channel_offset[phase] + i[1] / c.per_group * c.stacked * c.per_group +
                      i[1] % c.per_group) * strides[1] + i[0] * strides[0];
    for (int d = 0; d < c.spatial(); ++d) {
      if (q[2 + d] >= sizes[2 + d]) return;
      offset += q[2 + d] * strides[2 + d];
    }
    std::memcpy(to, &c.results[phase][offset * c.element_bytes], c.element_bytes);
  });
  return dx;
}

// Runs the launches of case `c` over a dx whose base lies off 16-byte
// boundaries, with 32- or 64-bit offsets at random: up to kMaxPhasesPerLaunch
// phases per launch, or split at random where `split`; `configure` sees each
// launch's params before it goes. Then every byte of dx as the reference has
// it, gaps and everything outside dx untouched.
template <typename Configure>
void check_interleave(const InterleaveCase& c, std::mt19937& rng, const std::string& where,
                      bool split, Configure configure) {
  const TensorView view = view_of(c.dx_sizes, c.channels_last, c.gap);
  std::vector<int64_t> last(c.dx_sizes.size());
  for (size_t d = 0; d < last.size(); ++d) last[d] = c.dx_sizes[d] - 1;
  const int64_t dx_bytes = (offset_of(view, last) + 1) * c.element_bytes;
  std::vector<unsigned char> storage(dx_bytes + 32, 0xab);
  const int64_t shift = (rng() % 8) * c.element_bytes % 16;
  unsigned char* dx = storage.data() + shift;
  const std::vector<unsigned char> before(dx, dx + dx_bytes);
  const bool wide = rng() % 4 == 0;
  int first = 0;
  while (first < c.phases()) {
    const int most = std::min(kMaxPhasesPerLaunch, c.phases() - first);
    const int count = !split || rng() % 2 ? most : 1 + static_cast<int>(rng() % most);
    InterleaveParams p;
    ASSERT_TRUE(make_interleave_walk(interleave_launch(c, dx, first, count, wide), &p)) << where;
    configure(p);
    ASSERT_EQ(launch_interleave<Target::host>(p, nullptr), nullptr) << where;
    first += count;
  }
  const std::vector<unsigned char> expected = reference_interleave(c, before);
  for (int64_t b = 0; b < static_cast<int64_t>(storage.size()); ++b) {
    const bool inside = b >= shift && b < shift + dx_bytes;
    ASSERT_EQ(storage[b], inside ? expected[b - shift] : 0xab)
        << where << " byte " << b << " of " << dx_bytes << " (element "
        << (b - shift) / c.element_bytes << ")";
  }
}

// Random 1-3D interleaves (random_interleave: strides 1-4, up to 64 phases
// over launches of up to 32 phases or split at random, groups, 2-, 4- and
// 8-byte elements, NCHW and channels_last), on the dense walk (1-6 chunks
// per thread) or, with gaps after each row, the row walk.
TEST(HostInterleave, WritesEveryPhaseSlotOnce) {
  std::mt19937 rng(1123);
  int launches = 0, chunked = 0, dense = 0;
  int carried = 0;  // dense launches whose rows span more than a run's pass
  for (int trial = 0; trial < 600; ++trial) {
    const InterleaveCase c = random_interleave(rng);
    const std::string where = "trial " + std::to_string(trial) + ": " + describe(c);
    check_interleave(c, rng, where, true, [&](InterleaveParams& p) {
      p.passes = static_cast<int>(rng() % 7);  // a dense walk's chunks per thread (0: the launcher's)
      // a gap after each row makes dx not dense, unless it has one row
      EXPECT_TRUE(p.dense || c.gap > 0) << where;
      chunked += p.walk.chunks_per_row > 2;
      dense += p.dense;
      carried += p.dense && p.row.size.value > kRunLanes * 16u / c.element_bytes;
      ++launches;
    });
    if (HasFatalFailure()) return;
  }
  EXPECT_GT(launches, 600);
  EXPECT_GT(chunked, 200);
  EXPECT_GT(dense, launches / 2);
  EXPECT_GT(launches - dense, launches / 5);
  EXPECT_GE(carried, 20);
}

// Short padded NCHW rows (short_padded_rows) on the walk make_interleave_walk
// chooses, whatever it is.
TEST(HostInterleave, ShortPaddedRowsReadTheirSlotsFromThePadding) {
  std::mt19937 rng(1128);
  for (int trial = 0; trial < 200; ++trial) {
    const InterleaveCase c = short_padded_rows(rng);
    const std::string where = "trial " + std::to_string(trial) + ": " + describe(c);
    check_interleave(c, rng, where, false, [](InterleaveParams&) {});
    if (HasFatalFailure()) return;
  }
}

// Parameters no instantiation serves (an element width no walk moves, outer
// dims past the kernels' count or none) are refused before anything runs;
// a launch with no rows does nothing.
TEST(HostLaunch, RefusesParametersWithoutAnInstantiation) {
  unsigned char dst[64] = {};
  InterleaveParams interleave;
  interleave.dst = dst;
  interleave.rows = 1;
  ScatterParams scatter;
  scatter.src = scatter.dst = dst;
  scatter.rows = 1;
  for (const int bytes : {1, 3, 16}) {
    interleave.element_bytes = scatter.element_bytes = bytes;
    EXPECT_STREQ(launch_interleave<Target::host>(interleave, nullptr), kInvalidLaunch) << bytes;
    EXPECT_STREQ(launch_scatter<Target::host>(scatter, nullptr), kInvalidLaunch) << bytes;
  }
  interleave.element_bytes = scatter.element_bytes = 4;
  for (const int outer : {0, kInterleaveOuterDims + 1}) {
    interleave.outer_dims = outer;
    EXPECT_STREQ(launch_interleave<Target::host>(interleave, nullptr), kInvalidLaunch) << outer;
  }
  for (const int outer : {0, kOuterDims + 1}) {
    scatter.outer_dims = outer;
    EXPECT_STREQ(launch_scatter<Target::host>(scatter, nullptr), kInvalidLaunch) << outer;
  }
  interleave.rows = scatter.rows = 0;
  EXPECT_EQ(launch_interleave<Target::host>(interleave, nullptr), nullptr);
  EXPECT_EQ(launch_scatter<Target::host>(scatter, nullptr), nullptr);
  for (const unsigned char b : dst) EXPECT_EQ(b, 0);
}

// The host grid's synchronized lanes: the test-only block_reverse kernel
// (tests/cpp/kernels/block_reverse.cu) stages through __shared__ and meets at
// __syncthreads; its blocks, the last one partial, reverse their elements.
TEST(HostGridSynchronizedLanes, SharedTileAfterTheBarrierHoldsEveryLanesValue) {
  const int64_t n = 3 * 256 + 100;
  std::vector<float> in(n), out(n, -1.0f);
  for (int64_t i = 0; i < n; ++i) in[i] = static_cast<float>(i);
  ASSERT_EQ(test_kernels::block_reverse_on_host(in.data(), out.data(), n), nullptr);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t mirror = (i / 256) * 256 + 255 - i % 256;
    ASSERT_EQ(out[i], mirror < n ? in[mirror] : 0.0f) << "element " << i;
  }
}

}  // namespace
}  // namespace bwdconv::hip
