// relayout's transpose kernel (csrc/hip/relayout.cu) on the host grid,
// against a plain loop: every element of every width lands in its place,
// nothing outside the matrices is written, both sides' accesses use whole
// sectors, and the tile's column reads hit distinct shared-memory banks.
// The sanitizer builds (CMakeLists.txt) run this file too.
#include <gtest/gtest.h>

#include <sys/mman.h>

#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "hip/host_grid.h"
#include "hip/relayout.h"
#include "hip/relayout_tile.h"

namespace bwdconv::hip {
namespace {

struct Matrices {
  int64_t batches, rows, columns;
  int64_t src_row_stride, src_batch_stride;
  int64_t dst_column_stride, dst_batch_stride;
};

// Matrices of the given sizes, each dim's stride padded by a random gap (or
// none, `dense`).
Matrices random_strides(int64_t batches, int64_t rows, int64_t columns, bool dense,
                        std::mt19937& rng) {
  const auto gap = [&] { return dense ? 0 : static_cast<int64_t>(rng() % 3); };
  Matrices m{batches, rows, columns, 0, 0, 0, 0};
  m.src_row_stride = columns + gap();
  m.src_batch_stride = rows * m.src_row_stride + gap();
  m.dst_column_stride = rows + gap();
  m.dst_batch_stride = columns * m.dst_column_stride + gap();
  return m;
}

template <typename Bits>
RelayoutParams params_of(const Matrices& m, const Bits* src, Bits* dst) {
  RelayoutParams p;
  p.src = src;
  p.dst = dst;
  p.batches = m.batches;
  p.rows = m.rows;
  p.columns = m.columns;
  p.src_batch_stride = m.src_batch_stride;
  p.src_row_stride = m.src_row_stride;
  p.dst_batch_stride = m.dst_batch_stride;
  p.dst_column_stride = m.dst_column_stride;
  p.element_bytes = sizeof(Bits);
  return p;
}

// Transposes random bits through the kernel and checks every dst element:
// the source's element where the matrices place one, the sentinel it was
// filled with (untouched) in the gaps.
template <typename Bits>
void expect_transposed(const Matrices& m, std::mt19937& rng) {
  std::vector<Bits> src(m.batches * m.src_batch_stride + 1);
  std::vector<Bits> dst(m.batches * m.dst_batch_stride + 1);
  for (Bits& v : src) v = static_cast<Bits>(rng());
  const Bits sentinel = static_cast<Bits>(0x5a5a5a5a5a5a5a5aULL);
  std::fill(dst.begin(), dst.end(), sentinel);
  ASSERT_EQ(launch_relayout<Target::host>(params_of(m, src.data(), dst.data()), nullptr), nullptr);
  std::vector<bool> placed(dst.size(), false);
  for (int64_t b = 0; b < m.batches; ++b) {
    for (int64_t r = 0; r < m.rows; ++r) {
      for (int64_t s = 0; s < m.columns; ++s) {
        const int64_t at = b * m.dst_batch_stride + s * m.dst_column_stride + r;
        ASSERT_EQ(dst[at], src[b * m.src_batch_stride + r * m.src_row_stride + s])
            << sizeof(Bits) << "-byte b " << b << " r " << r << " s " << s << " of " << m.batches
            << "x" << m.rows << "x" << m.columns;
        placed[at] = true;
      }
    }
  }
  for (size_t i = 0; i < dst.size(); ++i) {
    if (!placed[i]) {
      ASSERT_EQ(dst[i], sentinel) << "written outside the matrices at " << i;
    }
  }
}

template <typename Bits>
void expect_random_transposes(uint32_t seed) {
  std::mt19937 rng(seed);
  // Sides below, at and past each tile side (8 to 256), odd ones included.
  const int64_t sides[] = {1, 2, 3, 7, 8, 9, 16, 31, 33, 64, 65, 100, 257, 300};
  for (int trial = 0; trial < 10; ++trial) {
    const int64_t rows = sides[rng() % std::size(sides)];
    const int64_t columns = sides[rng() % std::size(sides)];
    const int64_t batches = 1 + rng() % 3;
    expect_transposed<Bits>(random_strides(batches, rows, columns, trial % 2 == 0, rng), rng);
  }
}

TEST(HostRelayout, TransposesTwoByteElements) { expect_random_transposes<uint16_t>(1); }
TEST(HostRelayout, TransposesFourByteElements) { expect_random_transposes<uint32_t>(2); }
TEST(HostRelayout, TransposesEightByteElements) { expect_random_transposes<uint64_t>(3); }

// NCHW to channels_last and back at a decoder's shape, scaled down: rows C,
// columns H*W, then rows H*W, columns C; the round trip returns the input.
TEST(HostRelayout, RoundTripOfAnNchwTensor) {
  std::mt19937 rng(4);
  const int64_t n = 2, c = 24, positions = 10 * 14;
  std::vector<uint16_t> nchw(n * c * positions), channels_last(nchw.size()), back(nchw.size());
  for (uint16_t& v : nchw) v = static_cast<uint16_t>(rng());
  const Matrices to_last{n, c, positions, positions, c * positions, c, c * positions};
  const RelayoutParams there = params_of(to_last, nchw.data(), channels_last.data());
  ASSERT_EQ(launch_relayout<Target::host>(there, nullptr), nullptr);
  EXPECT_EQ(channels_last[(1 * positions + 37) * c + 5], nchw[(1 * c + 5) * positions + 37]);
  const Matrices to_first{n, positions, c, c, c * positions, positions, c * positions};
  const RelayoutParams back_again = params_of(to_first, channels_last.data(), back.data());
  ASSERT_EQ(launch_relayout<Target::host>(back_again, nullptr), nullptr);
  EXPECT_EQ(back, nchw);
}

TEST(HostRelayout, RefusesOtherWidthsAndNegativeSizes) {
  std::vector<uint32_t> src(16), dst(16);
  RelayoutParams p = params_of(Matrices{1, 4, 4, 4, 16, 4, 16}, src.data(), dst.data());
  p.element_bytes = 3;
  EXPECT_NE(launch_relayout<Target::host>(p, nullptr), nullptr);
  p.element_bytes = 4;
  p.rows = -1;
  EXPECT_NE(launch_relayout<Target::host>(p, nullptr), nullptr);
  p.rows = 0;  // nothing to move, nothing written
  std::fill(dst.begin(), dst.end(), 7u);
  EXPECT_EQ(launch_relayout<Target::host>(p, nullptr), nullptr);
  for (const uint32_t v : dst) EXPECT_EQ(v, 7u);
}

// The first element of `v` on a 64-byte boundary, as tensors' storage is.
template <typename Bits>
Bits* aligned_start(std::vector<Bits>& v) {
  const auto address = reinterpret_cast<uintptr_t>(v.data());
  return v.data() + (64 - address % 64) % 64 / sizeof(Bits);
}

// Dense, 64-byte aligned matrices whose rows and columns are whole tiles:
// each warp's loads and stores touch only the sectors that hold their
// bytes, and dst is written once.
template <typename Bits>
void expect_whole_sectors(int64_t rows, int64_t columns) {
  std::mt19937 rng(5);
  const Matrices m = random_strides(2, rows, columns, true, rng);
  const int64_t elements = m.batches * m.src_batch_stride, slack = 64 / sizeof(Bits);
  std::vector<Bits> src_storage(elements + slack), dst_storage(elements + slack);
  Bits *src = aligned_start(src_storage), *dst = aligned_start(dst_storage);
  host::start_recording();
  ASSERT_EQ(launch_relayout<Target::host>(params_of(m, src, dst), nullptr), nullptr);
  const host::Recording recording = host::stop_recording();
  ASSERT_EQ(recording.launches.size(), 1u);
  const host::LaunchRecord& launch = recording.launches[0];
  const int64_t bytes = elements * static_cast<int64_t>(sizeof(Bits));
  EXPECT_EQ(launch.load.bytes, bytes);
  EXPECT_EQ(launch.store.bytes, bytes);
  EXPECT_EQ(launch.store.distinct_bytes, bytes);
  EXPECT_EQ(launch.load.warp.sectors, launch.load.warp.min_sectors);
  EXPECT_EQ(launch.store.warp.sectors, launch.store.warp.min_sectors);
  EXPECT_EQ(launch.load.wavefront.sectors, launch.load.wavefront.min_sectors);
  EXPECT_EQ(launch.store.wavefront.sectors, launch.store.wavefront.min_sectors);
  // A warp's request is at least 32 elements in a row: 2 sectors of 2-byte ones.
  EXPECT_GE(launch.load.warp.min_sectors * 32,
            launch.load.warp.requests * static_cast<int64_t>(32 * sizeof(Bits)));
  EXPECT_GE(launch.store.warp.min_sectors * 32,
            launch.store.warp.requests * static_cast<int64_t>(32 * sizeof(Bits)));
}

TEST(HostRelayout, WholeSectorsTwoBytes) { expect_whole_sectors<uint16_t>(128, 192); }
TEST(HostRelayout, WholeSectorsFourBytes) { expect_whole_sectors<uint32_t>(64, 128); }
TEST(HostRelayout, WholeSectorsEightBytes) { expect_whole_sectors<uint64_t>(64, 64); }
// A short side: 16 channels of many positions, and back.
TEST(HostRelayout, WholeSectorsShortRows) { expect_whole_sectors<uint16_t>(16, 512); }
TEST(HostRelayout, WholeSectorsShortColumns) { expect_whole_sectors<uint16_t>(512, 16); }

// `bytes` of zero pages reserved but not committed: a view of a tensor past
// 2^31 elements costs only the pages its elements touch.
struct SparseBuffer {
  void* data;
  size_t bytes;
  explicit SparseBuffer(size_t n)
      : data(mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                  -1, 0)),
        bytes(n) {}
  ~SparseBuffer() {
    if (data != MAP_FAILED) munmap(data, bytes);
  }
};

// Matrices whose second batch lies past 2^31 elements from the first, in
// src and in dst: the kernel's offsets must be 64-bit to reach it.
TEST(HostRelayout, ReachesBatchesPastTwoToThe31Elements) {
  const int64_t far = (int64_t{1} << 31) + 96;
  const Matrices m{2, 5, 70, 70, far, 5, far + 64};
  const size_t elements = static_cast<size_t>(far + 64 + 5 * 70);
  SparseBuffer src_buffer(elements * sizeof(uint16_t)), dst_buffer(elements * sizeof(uint16_t));
  ASSERT_NE(src_buffer.data, MAP_FAILED);
  ASSERT_NE(dst_buffer.data, MAP_FAILED);
  auto* src = static_cast<uint16_t*>(src_buffer.data);
  auto* dst = static_cast<uint16_t*>(dst_buffer.data);
  for (int64_t b = 0; b < 2; ++b) {
    for (int64_t e = 0; e < 5 * 70; ++e) src[b * far + e] = static_cast<uint16_t>(1 + b * 1000 + e);
  }
  ASSERT_EQ(launch_relayout<Target::host>(params_of(m, src, dst), nullptr), nullptr);
  for (int64_t b = 0; b < 2; ++b) {
    for (int64_t r = 0; r < 5; ++r) {
      for (int64_t s = 0; s < 70; ++s) {
        ASSERT_EQ(dst[b * (far + 64) + s * 5 + r], src[b * far + r * 70 + s])
            << "b " << b << " r " << r << " s " << s;
      }
    }
  }
}

// The most distinct 4-byte words any bank serves in one shared-memory pass
// (32 lanes; 16 for 8-byte elements) when the threads of a block access
// the tile elements `element_of(thread, i)` (row, column), i = 0, 1, ...
template <typename ElementOf>
int worst_bank_conflict(int element_bytes, int per_thread, int64_t stride, ElementOf element_of) {
  const int lanes = element_bytes == 8 ? 16 : 32;
  int worst = 0;
  for (int i = 0; i < per_thread; ++i) {
    for (int first = 0; first < kRelayoutThreads; first += lanes) {
      std::map<int64_t, std::set<int64_t>> words_of_bank;
      for (int thread = first; thread < first + lanes; ++thread) {
        const auto [r, c] = element_of(thread, i);
        const int64_t byte = (r * stride + c) * element_bytes;
        for (int64_t w = byte / 4; w < (byte + element_bytes + 3) / 4; ++w) {
          words_of_bank[w % 32].insert(w);
        }
      }
      for (const auto& [bank, words] : words_of_bank) {
        worst = std::max(worst, static_cast<int>(words.size()));
      }
    }
  }
  return worst;
}

// Every tile shape of every width (relayout_row_stride): the column reads
// of the store phase are free of bank conflicts, the row writes of the load
// phase at most 2-way (where a pass spans several short rows).
TEST(RelayoutTile, ColumnReadsHitDistinctBanks) {
  for (const int bytes : {2, 4, 8}) {
    const int64_t elements = relayout_tile_elements(bytes), least = relayout_min_side(bytes);
    const int per_thread = static_cast<int>(elements / kRelayoutThreads);
    for (int64_t rows = least; rows * least <= elements; rows *= 2) {
      const int64_t columns = elements / rows;
      const int64_t stride = relayout_row_stride(rows, columns, bytes);
      EXPECT_GE(stride, columns);
      EXPECT_LE(rows * stride * bytes, relayout_tile_words(bytes) * 4);
      const int reads = worst_bank_conflict(bytes, per_thread, stride, [&](int thread, int i) {
        const int64_t column = thread / rows + i * (kRelayoutThreads / rows);
        return std::pair<int64_t, int64_t>{thread % rows, column};
      });
      EXPECT_EQ(reads, 1) << bytes << "-byte tile " << rows << "x" << columns;
      const int writes = worst_bank_conflict(bytes, per_thread, stride, [&](int thread, int i) {
        const int64_t row = thread / columns + i * (kRelayoutThreads / columns);
        return std::pair<int64_t, int64_t>{row, thread % columns};
      });
      EXPECT_LE(writes, 2) << bytes << "-byte tile " << rows << "x" << columns;
    }
  }
}

TEST(RelayoutTile, ShortSidesShrinkTheTile) {
  const RelayoutTile square = relayout_tile(512, 4096, 2);
  EXPECT_EQ(square.rows_log2, 6);
  EXPECT_EQ(square.columns_log2, 6);
  const RelayoutTile channels = relayout_tile(3, 100000, 2);  // 3 channels, NCHW to channels_last
  EXPECT_EQ(channels.rows_log2, 4);                            // 16: the least side of 2 bytes
  EXPECT_EQ(channels.columns_log2, 8);
  const RelayoutTile back = relayout_tile(100000, 24, 4);  // 24 channels, back to NCHW
  EXPECT_EQ(back.columns_log2, 5);
  EXPECT_EQ(back.rows_log2, 6);
  const RelayoutTile wide = relayout_tile(8, 8, 8);
  EXPECT_EQ(wide.rows_log2 + wide.columns_log2, 10);  // 1,024 elements of 8 bytes
}

}  // namespace
}  // namespace bwdconv::hip
