#if defined(BWDCONV_HOST_TARGET) && defined(__GNUC__) && !defined(__clang__)
// coords[] is filled for every dim a view has; GCC cannot see that dims >= 2.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include "interleave.h"

#include "interleave_index.h"
#include "launch.h"
#include "row_chunks.h"

namespace bwdconv::hip {
namespace {

// a or b, chosen field by field (no select between addresses, which would
// keep the sources in memory).
template <typename Bits, typename Index>
__device__ inline RowSource<Bits, Index> choose(bool first, const RowSource<Bits, Index>& a,
                                                const RowSource<Bits, Index>& b) {
  RowSource<Bits, Index> source;
  source.row = first ? a.row : b.row;
  source.stride = first ? a.stride : b.stride;
  source.extent = first ? a.extent : b.extent;
  source.keep = first ? a.keep : b.keep;
  return source;
}

// The sources of a row's residues. kStep 1 and 2 (the row dim's stride)
// look each residue's source up once per row; kStep 0 (any stride) looks it
// up per element.
template <typename Bits, typename Index, int kStep, int kOuter>
struct RowSources {
  RowSource<Bits, Index> fixed[kStep > 0 ? kStep : 1];

  RowSources() = default;

  __device__ RowSources(const InterleaveParams& p, const RowOrigin<kOuter, Index>& origin) {
    if constexpr (kStep > 0) {
      for (int r = 0; r < kStep; ++r) fixed[r] = row_source<Bits, Index, kOuter>(p, origin, r);
    }
  }

  __device__ RowSource<Bits, Index> at(const InterleaveParams& p,
                                       const RowOrigin<kOuter, Index>& origin,
                                       Position residue) const {
    if constexpr (kStep == 0) {
      return row_source<Bits, Index, kOuter>(p, origin, residue);
    } else if constexpr (kStep == 1) {
      return fixed[0];
    } else {
      return choose(residue == 0, fixed[0], fixed[1]);
    }
  }
};

// A row's interior, positions [0, end): before every residue's first slot
// past its source's values (end 0 when some residue is left to another
// writer); `writes`: some residue is this launch's.
struct RowInterior {
  Position end;
  bool writes;
};

template <typename Bits, typename Index, int kStep, int kOuter>
__device__ inline RowInterior row_interior(const InterleaveParams& p,
                                           const RowOrigin<kOuter, Index>& origin,
                                           const RowSources<Bits, Index, kStep, kOuter>& sources,
                                           Position step) {
  const Position size = static_cast<Position>(p.row.size.value);
  Position end = size;
  bool keeps = false, writes = false;
  for (Position r = 0; r < step; ++r) {
    const RowSource<Bits, Index> source = sources.at(p, origin, r);
    const Position values = values_end(source, r, step, p.row.padding, size);
    end = values < end ? values : end;
    keeps = keeps || source.keep;
    writes = writes || !source.keep;
  }
  return {keeps || end < 0 ? 0 : end, writes};
}

// The sources of a chunk's lanes for a fixed step s whose lane 0 has residue
// r0: lane j + s*m reads residue (r0 + j) mod s at slot o + (r0 + j) div s + m
// (`source[j]`, `slot_shift[j]`), the same for every chunk of a row.
template <typename Bits, typename Index, int kStep, int kOuter>
struct LaneSources {
  static constexpr int kFixed = kStep > 0 ? kStep : 1;
  RowSource<Bits, Index> source[kFixed];
  Position slot_shift[kFixed] = {};

  __device__ LaneSources(const RowSources<Bits, Index, kStep, kOuter>& sources, Position r0) {
    if constexpr (kStep == 1) {
      source[0] = sources.fixed[0];
    } else if constexpr (kStep == 2) {
      const bool odd = r0 != 0;
      source[0] = choose(odd, sources.fixed[1], sources.fixed[0]);
      source[1] = choose(odd, sources.fixed[0], sources.fixed[1]);
      slot_shift[1] = odd;
    }
  }

  // Whether a stride-1 source's slots from `o` on are an aligned 16-byte copy.
  __device__ bool copies_from(Position o) const {
    return kStep == 1 && source[0].extent > 0 && source[0].stride == 1 &&
           row_head(source[0].row + o) == 0;
  }
};

// Slot q of a source, or a zero past its values.
template <typename Bits, typename Index>
__device__ inline Bits value_at(const RowSource<Bits, Index>& source, Position q) {
  return q < source.extent ? global_load(source.row + q * source.stride) : Bits{};
}

// An interior chunk (every lane inside the row and inside its source's
// values) whose lane 0 is at cursor `at`; with a fixed step, as `lane` says.
template <typename Bits, typename Index, int kStep, int kOuter>
__device__ inline Chunk<Bits> gather(const InterleaveParams& p,
                                     const RowOrigin<kOuter, Index>& origin,
                                     const RowSources<Bits, Index, kStep, kOuter>& sources,
                                     const LaneSources<Bits, Index, kStep, kOuter>& lane,
                                     RowCursor at, Position step) {
  constexpr int kLanes = Chunk<Bits>::kLanes;
  Chunk<Bits> values;
  if constexpr (kStep > 0) {
    for (int j = 0; j < kStep; ++j) {
      const RowSource<Bits, Index>& source = lane.source[j];
      if (source.extent > 0) {
        const Bits* from = source.row + (at.o + lane.slot_shift[j]) * source.stride;
        for (int m = 0; m < kLanes / kStep; ++m) {
          values.put(j + kStep * m, global_load(from + m * source.stride));
        }
      }
    }
  } else {
    // Any step: each lane looks its source up (Chunk::put: the loop stays
    // rolled; unrolled, the lookups spill).
    BWDCONV_NO_UNROLL
    for (int e = 0; e < kLanes; ++e) {
      values.put(e, value_at(sources.at(p, origin, at.r), at.o));
      at.advance(1, 0, 1, step);
    }
  }
  return values;
}

// The lanes of `mask` of a chunk whose lane 0 stands at slot `o` (cursor at
// a row position, or before the row's start when the chunk's first lanes
// belong to the row before), with a fixed step as `lane` says: zeros past a
// source's values and in the other lanes. Adds to *written the lanes of
// `mask` whose residue this launch writes.
template <typename Bits, typename Index, int kStep, int kOuter>
__device__ inline Chunk<Bits> gather_piece(const LaneSources<Bits, Index, kStep, kOuter>& lane,
                                           Position o, unsigned mask, unsigned* written) {
  constexpr int kLanes = Chunk<Bits>::kLanes;
  // the lanes j, j + kStep, ... of a chunk
  constexpr unsigned kEvery = kStep == 1 ? 0xffffu : 0x5555u;
  Chunk<Bits> values;
  for (int j = 0; j < kStep; ++j) {
    const RowSource<Bits, Index>& source = lane.source[j];
    // lane j + kStep * m reads slot q0 + m (a lane of `mask` has q0 + m >= 0)
    const Position q0 = o + lane.slot_shift[j];
    const Position held = source.extent - q0;  // slots from q0 on that hold values
    const Index offset = q0 * source.stride;
    for (int m = 0; m < kLanes / kStep; ++m) {
      const int e = j + kStep * m;
      if (((mask >> e) & 1) && m < held) {
        values.put(e, global_load(source.row + (offset + m * source.stride)));
      }
    }
    *written |= source.keep ? 0u : mask & (kEvery << j) & ((1u << kLanes) - 1);
  }
  return values;
}

// Rows of dx's stride-1 dim, 2^lane_shift threads per row (grid-stride over
// rows). A row's origin costs two divisions per outer dim; its interior
// chunks (whole in dx, every lane inside its source's values) take one
// 16-byte store and additions each (a 16-byte load too when a stride-1 row
// source aligns with dx); its end chunks, and rows that leave some slots to
// another writer, go element by element. kOuter: outer dims in use. The walk
// for dx that is not dense (make_interleave_walk).
template <typename Bits, typename Index, int kStep, int kOuter>
__global__ void __launch_bounds__(kThreadsPerBlock)
    interleave_kernel(InterleaveParams p, Position rows) {
  constexpr int kLanes = Chunk<Bits>::kLanes;
  static_assert(kStep == 0 || kLanes % kStep == 0, "a fixed step divides the chunk");
  constexpr int kFixed = kStep > 0 ? kStep : 1;  // residues looked up once per row
  Bits* dst = static_cast<Bits*>(p.dst);
  const Position lanes = Position{1} << p.walk.lane_shift;
  const Position lane = threadIdx.x & (lanes - 1);
  const Position rows_per_block = kThreadsPerBlock >> p.walk.lane_shift;
  const Position size = static_cast<Position>(p.row.size.value);
  const Position chunks = static_cast<Position>(p.walk.chunks_per_row);
  const Position step = kStep ? kStep : static_cast<Position>(p.row.step.value);
  const Position padding = p.row.padding;
  for (Position row = blockIdx.x * rows_per_block + (threadIdx.x >> p.walk.lane_shift); row < rows;
       row += gridDim.x * rows_per_block) {
    const RowOrigin<kOuter, Index> origin = row_origin<kOuter, Index>(p, row);
    const RowSources<Bits, Index, kStep, kOuter> sources(p, origin);
    const RowInterior interior = row_interior(p, origin, sources, step);
    if (!interior.writes) continue;
    Bits* dst_row = dst + origin.dst_offset;
    // Chunk c holds row positions c * kLanes - head ... + kLanes - 1.
    const Position head = row_head(dst_row);
    const Position c_begin = (head + kLanes - 1) / kLanes;
    const Position c_end_floor = (interior.end + head) / kLanes;
    const Position c_end = c_end_floor > c_begin ? c_end_floor : c_begin;
    Position chunk = first_chunk(dst_row, head, lane, lanes, c_begin);
    RowCursor at = row_cursor<kStep>(chunk * kLanes - head, -padding, p.row.step, p.walk);
    // Every chunk of the row starts at the same residue (the walk advances
    // by multiples of the chunk, which a fixed step divides).
    const LaneSources<Bits, Index, kStep, kOuter> lane_sources(sources, at.r);
    const RowSource<Bits, Index>& first = lane_sources.source[0];
    if (lane_sources.copies_from(at.o)) {
      for (; chunk < c_end; chunk += lanes, at.advance(p.walk, kLanes, step)) {
        store_chunk(dst_row + at.first, load_chunk(first.row + at.o));
      }
    } else {
      for (; chunk < c_end; chunk += lanes, at.advance(p.walk, kLanes, step)) {
        store_chunk(dst_row + at.first, gather(p, origin, sources, lane_sources, at, step));
      }
    }
    // The end chunks, [0, c_begin) and [c_end, chunks), element by element:
    // positions outside the row, and residues another writer owns, are not
    // written.
    const Position ends = c_begin + chunks - c_end;
    for (Position k = lane; k < ends; k += lanes) {
      const Position c = k < c_begin ? k : c_end + (k - c_begin);
      RowCursor end_at = row_cursor<kStep>(c * kLanes - head, -padding, p.row.step, p.walk);
      for (int e = 0; e < kLanes; ++e) {
        // with a fixed step, lane e reads as in an interior chunk
        const RowSource<Bits, Index> source =
            kStep > 0 ? lane_sources.source[e % kFixed] : sources.at(p, origin, end_at.r);
        const Position q =
            kStep > 0 ? end_at.o + lane_sources.slot_shift[e % kFixed] + e / kFixed : end_at.o;
        const Position j = end_at.first + (kStep > 0 ? e : 0);
        if (j >= 0 && j < size && !source.keep) global_store(dst_row + j, value_at(source, q));
        if (kStep == 0) end_at.advance(1, 0, 1, step);
      }
    }
  }
}

// The row a dense walk's thread stands in: its origin, its residues'
// sources and where its interior ends (row_interior), carried from chunk to
// chunk while the thread's chunks stay in the row.
template <typename Bits, typename Index, int kStep, int kOuter>
struct DenseRow {
  Position row = 0;
  RowOrigin<kOuter, Index> origin;
  RowSources<Bits, Index, kStep, kOuter> sources;
  Position interior_end = 0;

  // Sets up row `row_index`: two divisions per outer dim, the sources.
  __device__ void set_up(const InterleaveParams& p, Position row_index, Position step) {
    row = row_index;
    origin = row_origin<kOuter, Index>(p, row);
    sources = RowSources<Bits, Index, kStep, kOuter>(p, origin);
    interior_end = row_interior(p, origin, sources, step).end;
  }
};

// dx dense in walk order (rows back to back) as 16-byte chunks of its
// memory, in runs (DenseRun): the lanes of a warp on consecutive chunks,
// each thread kRunLanes chunks on from pass to pass. A chunk may hold the
// end of one row and the start of the next, so short rows, rows off a
// 16-byte boundary and the zeros past a result's values all go out in whole
// 16-byte stores; a chunk goes out lane by lane only at dx's ends or where
// another writer owns some of its elements (`keep`). A thread carries its
// row and row cursor from chunk to chunk by additions and pays a row's
// divisions and source lookups only where its chunk starts in a later row.
// With a fixed step (1, 2) and up to four outer dims, a chunk inside its
// row's interior goes as in the row walk (a 16-byte copy where its source is
// an aligned stride-1 run of values); other chunks go element by element, a
// source choice, a comparison and additions each, and pay the next row's
// divisions where they reach it.
template <typename Bits, typename Index, int kStep, int kOuter>
__global__ void __launch_bounds__(kThreadsPerBlock)
    interleave_dense_kernel(InterleaveParams p, Position total) {
  constexpr int kLanes = Chunk<Bits>::kLanes;
  Bits* dst = static_cast<Bits*>(p.dst);
  const Position size = static_cast<Position>(p.row.size.value);
  const Position step = kStep ? kStep : static_cast<Position>(p.row.step.value);
  const Position lead = -p.row.padding;
  // One position further, one chunk further, and from past one chunk to the
  // thread's next: quotients and remainders by step.
  const RowMove element_move = row_move<kStep>(1, p.row.step);
  const RowMove chunk_move = row_move<kStep>(kLanes, p.row.step);
  const RowMove hop = row_move<kStep>((kRunLanes - 1) * kLanes, p.row.step);
  // Chunk c holds dx elements c * kLanes - head ... + kLanes - 1.
  const Position head = row_head(dst);
  const Position chunks = (total + head + kLanes - 1) / kLanes;
  DenseRow<Bits, Index, kStep, kOuter> state;
  // Past the thread's last chunk in state.row: none yet, so the first pass sets up.
  RowCursor at{size, 0, 0};
  for (DenseRun run(p.passes, chunks); run.chunk < run.end; run.next()) {
    const Position first = run.chunk * kLanes - head;
    const Position begin = first < 0 ? 0 : first;  // the chunk's first element inside dx
    at.advance(hop, step);
    if (at.first >= size) {  // the chunk starts in a later row
      const Position row = divide_position(begin, p.row.size);
      state.set_up(p, row, step);
      // lane 0's position, before the row for dx's first chunk
      at = row_cursor<kStep>(first - row * size, lead, p.row.step, p.walk);
    }
    if constexpr (kStep > 0 && kOuter < kInterleaveOuterDims) {
      // A chunk inside its row's interior: as in the row walk (not with five
      // outer dims: the two paths' state then spills on sm_90).
      if (first >= 0 && at.first + kLanes <= state.interior_end) {
        const LaneSources<Bits, Index, kStep, kOuter> lane_sources(state.sources, at.r);
        store_chunk(dst + first,
                    lane_sources.copies_from(at.o)
                        ? load_chunk(lane_sources.source[0].row + at.o)
                        : gather(p, state.origin, state.sources, lane_sources, at, step));
        at.advance(chunk_move, step);
        continue;
      }
    }
    if constexpr (kStep > 0 && kOuter < kInterleaveOuterDims) {
      // A chunk of at most two rows (rows of a chunk or longer): each row's
      // piece gathered as an interior chunk is, lanes outside it masked.
      if (size >= kLanes) {
        const Position split = size - at.first;  // lanes [0, split) lie in this row
        const unsigned lanes = ((1u << kLanes) - 1) & (~0u << (begin - first)) &
                               (total - first < kLanes ? (1u << (total - first)) - 1 : ~0u);
        const unsigned here = split < kLanes ? lanes & ((1u << split) - 1) : lanes;
        unsigned written = 0;  // bit e: lane e is an element of dx this launch writes
        Chunk<Bits> values = gather_piece(
            LaneSources<Bits, Index, kStep, kOuter>(state.sources, at.r), at.o, here, &written);
        if (here != lanes) {  // the rest of the chunk starts the next row
          state.set_up(p, state.row + 1, step);
          at = row_cursor<kStep>(-split, lead, p.row.step, p.walk);
          const Chunk<Bits> next = gather_piece(
              LaneSources<Bits, Index, kStep, kOuter>(state.sources, at.r), at.o, lanes & ~here,
              &written);
          values.merge(next);
        }
        store_lanes(dst, first, values, written);
        at.advance(chunk_move, step);
        continue;
      }
    }
    Chunk<Bits> values;
    unsigned written = 0;  // bit e: lane e is an element of dx this launch writes
    BWDCONV_NO_UNROLL
    for (int e = 0; e < kLanes; ++e) {
      const Position element = first + e;
      const RowSource<Bits, Index> source = state.sources.at(p, state.origin, at.r);
      if (element >= begin && element < total && !source.keep) {
        written |= 1u << e;
        values.put(e, value_at(source, at.o));
      }
      at.advance(element_move, step);
      if (at.first == size && element + 1 < total) {
        state.set_up(p, state.row + 1, step);
        at = row_cursor<kStep>(0, lead, p.row.step, p.walk);
      }
    }
    store_lanes(dst, first, values, written);
  }
}

// The dense walk where dx allows it (make_interleave_walk), else the row walk.
template <typename Bits, typename Index, int kStep, int kOuter>
void launch_walk(const InterleaveParams& p, NativeStream stream) {
  const WalkKernels<InterleaveParams> kernels{"interleave",
                                              interleave_kernel<Bits, Index, kStep, kOuter>,
                                              interleave_dense_kernel<Bits, Index, kStep, kOuter>};
  launch_walk_kernels<Chunk<Bits>::kLanes>(kernels, p, stream);
}

}  // namespace

// The instantiation for the element width, the index width, the row dim's
// stride (fixed_step) and the outer dims.
template <Target target>
LaunchError launch_interleave(const InterleaveParams& params, NativeStream stream) {
  if (params.rows == 0) return nullptr;
  bool known = false;
  visit_walk(params.element_bytes, !params.wide_offsets, [&](auto bits, auto index) {
    visit_constant<0, 2>(fixed_step(params.row.step.value), [&](auto step) {
      known = visit_constant<1, kInterleaveOuterDims>(params.outer_dims, [&](auto outer) {
        launch_walk<decltype(bits), decltype(index), decltype(step)::value,
                    decltype(outer)::value>(params, stream);
      });
    });
  });
  return known ? last_launch_error() : kInvalidLaunch;
}

BWDCONV_TARGET_FUNCTION(LaunchError, launch_interleave, kNoDeviceKernels, const InterleaveParams&,
                        NativeStream);

}  // namespace bwdconv::hip
