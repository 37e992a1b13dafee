#include "scatter.h"

#include "launch.h"
#include "row_chunks.h"
#include "scatter_index.h"

namespace bwdconv::hip {
namespace {

// The source elements of a chunk whose lane e is dst position first + e:
// source position o + (r + e) / step where step divides r + e (o, r: the row
// cursor at first), else a zero. kStep fixes the step (1, 2) or is 0 (`step`
// holds it). An interior chunk (kInterior) reads source positions inside the
// row only; an end chunk may reach past either end, which reads as zeros.
template <int kStep, bool kInterior, typename Bits, typename Index>
__device__ inline Chunk<Bits> gather(const Bits* src_row, Index src_stride, Position src_size,
                                     Position o, Position r, Position step) {
  constexpr int kLanes = Chunk<Bits>::kLanes;
  const auto source = [&](Position at) {
    return kInterior ? global_load(src_row + at * src_stride)
                     : load_or_zero(src_row, at, src_stride, src_size);
  };
  Chunk<Bits> values;
  if constexpr (kStep == 1) {
    for (int e = 0; e < kLanes; ++e) values.put(e, source(o + e));
  } else if constexpr (kStep == 2) {
    // Lane e reads where e + r is even: with r = 0 lane 2m reads o + m, with
    // r = 1 lane 2m + 1 reads o + 1 + m; each source element once.
    const bool odd = r != 0;
    for (int m = 0; m < kLanes / 2; ++m) values.put(2 * m, source(o + odd + m));
    values.shift_odd(odd);
  } else {
    for (int e = 0; e < kLanes; ++e) {
      if (r == 0) values.put(e, source(o));
      const bool wrap = ++r == step;
      r = wrap ? 0 : r;
      o += wrap;
    }
  }
  return values;
}

// The lanes of `mask` of a chunk whose lane 0 stands at source position o
// and remainder r of a row (at or before its start when the chunk's first
// lanes belong to the row before), zeros in the other lanes and where the
// row holds no values (`live` false). kStep fixes the step (1, 2) or is 0
// (`step` holds it).
template <int kStep, typename Bits, typename Index>
__device__ inline Chunk<Bits> gather_piece(const Bits* src_row, bool live, Index src_stride,
                                           Position src_size, Position o, Position r,
                                           Position step, unsigned mask) {
  constexpr int kLanes = Chunk<Bits>::kLanes;
  // only the lanes that hold a source element load it
  const auto holds = [&](int e, Position at) {
    return live && ((mask >> e) & 1) && at >= 0 && at < src_size;
  };
  const auto value = [&](int e, Position at) {
    return holds(e, at) ? global_load(src_row + at * src_stride) : Bits{};
  };
  Chunk<Bits> values;
  if constexpr (kStep == 1) {
    for (int e = 0; e < kLanes; ++e) values.put(e, value(e, o + e));
  } else if constexpr (kStep == 2) {
    // as in gather: lane 2m + odd reads o + odd + m, at an offset of m
    // strides from the first (no multiply per lane)
    const int odd = r != 0;
    const Position first = o + odd;
    const Index offset = first * src_stride;
    for (int m = 0; m < kLanes / 2; ++m) {
      if (holds(2 * m + odd, first + m)) {
        values.put(2 * m, global_load(src_row + (offset + m * src_stride)));
      }
    }
    values.shift_odd(odd);
  } else {
    for (int e = 0; e < kLanes; ++e) {
      if (r == 0) values.put(e, value(e, o));
      const bool wrap = ++r == step;
      r = wrap ? 0 : r;
      o += wrap;
    }
  }
  return values;
}

// Where row `row` of the walk starts (one division per outer dim): its
// offsets in dst and src, and whether its outer coordinates hold source
// values (else the whole row is zeros). kOuter: outer dims in use; the
// outermost maps one to one (make_scatter_walk).
template <typename Index>
struct RowStart {
  Index dst_offset, src_offset;
  bool live;
};

template <typename Index, int kOuter>
__device__ inline RowStart<Index> row_start(const ScatterParams& p, Position row) {
  Position rest = row;
  RowStart<Index> start{0, 0, p.row.src_size > 0};
  for (int k = kOuter - 1; k >= 0; --k) {
    const ScatterWalkDim& dim = p.outer[k];
    // the outermost coordinate is what the others leave (row < rows)
    const Position next = k == 0 ? 0 : divide_position(rest, dim.size);
    const Position j = rest - next * static_cast<Position>(dim.size.value);
    rest = next;
    const Position o = k == 0 ? j : source_position(j, dim, &start.live);
    start.dst_offset += j * static_cast<Index>(dim.dst_stride);
    start.src_offset += o * static_cast<Index>(dim.src_stride);
  }
  return start;
}

// A row's interior, positions [begin, end): inside the row, with every source
// position a chunk there reads inside the source row (a row with no source
// values: all of it, zeros).
struct RowSpan {
  Position begin, end;
};

__device__ inline RowSpan row_interior(const ScatterParams& p, bool live, Position step) {
  const Position lead = p.row.lead;
  const Position size = static_cast<Position>(p.row.size.value);
  const Position reach = lead + step * (p.row.src_size - 1) + 1;  // past the last source position
  return {live && lead > 0 ? lead : 0, live && reach < size ? reach : size};
}

// Rows of dst's stride-1 dim, 2^lane_shift threads per row (grid-stride over
// rows). A row's outer coordinates cost one division per outer dim; its
// interior chunks (whole in dst, reading source positions inside the row)
// take one 16-byte store and additions each; its end chunks go through the
// clamped path. The walk for dst that is not dense (make_scatter_walk).
template <typename Bits, typename Index, int kStep, int kOuter>
__global__ void __launch_bounds__(kThreadsPerBlock)
    scatter_kernel(ScatterParams p, Position rows) {
  constexpr int kLanes = Chunk<Bits>::kLanes;
  const Bits* src = static_cast<const Bits*>(p.src);
  Bits* dst = static_cast<Bits*>(p.dst);
  const Position lanes = Position{1} << p.walk.lane_shift;
  const Position lane = threadIdx.x & (lanes - 1);
  const Position rows_per_block = kThreadsPerBlock >> p.walk.lane_shift;
  const Position size = static_cast<Position>(p.row.size.value);
  const Position chunks = static_cast<Position>(p.walk.chunks_per_row);
  const Position step = kStep ? kStep : static_cast<Position>(p.row.step.value);
  const Position src_size = p.row.src_size;
  const Index src_stride = static_cast<Index>(p.row.src_stride);
  for (Position row = blockIdx.x * rows_per_block + (threadIdx.x >> p.walk.lane_shift); row < rows;
       row += gridDim.x * rows_per_block) {
    const RowStart<Index> start = row_start<Index, kOuter>(p, row);
    const bool live = start.live;
    Bits* dst_row = dst + start.dst_offset;
    const Bits* src_row = src + start.src_offset;
    // Chunk c holds dst positions c * kLanes - head ... + kLanes - 1 (the row
    // starts `head` elements past a 16-byte boundary). Interior chunks,
    // [c_begin, c_end), hold positions of the row's interior.
    const Position head = row_head(dst_row);
    const Position lead = p.row.lead;
    const RowSpan interior = row_interior(p, live, step);
    const Position c_begin = (interior.begin + head + kLanes - 1) / kLanes;
    const Position c_end_floor = (interior.end + head) / kLanes;
    const Position c_end = c_end_floor > c_begin ? c_end_floor : c_begin;
    Position chunk = first_chunk(dst_row, head, lane, lanes, c_begin);
    RowCursor at = row_cursor<kStep>(chunk * kLanes - head, lead, p.row.step, p.walk);
    const auto advance = [&] { at.advance(p.walk, kLanes, step); };
    // A step-1 row whose source chunks are 16-byte aligned too is a copy.
    const bool copies = kStep == 1 && live && src_stride == 1 && chunks_align(src_row, dst_row, -lead);
    if (copies) {
      for (; chunk < c_end; chunk += lanes, advance()) {
        store_chunk(dst_row + at.first, load_chunk(src_row + at.o));
      }
    } else {
      for (; chunk < c_end; chunk += lanes, advance()) {
        Chunk<Bits> values;
        if (live) {
          values = gather<kStep, true, Bits, Index>(src_row, src_stride, src_size, at.o, at.r, step);
        }
        store_chunk(dst_row + at.first, values);
      }
    }
    // The end chunks: positions past the row's ends are not written, source
    // positions past them read as zeros.
    const auto write_end_chunk = [&](Position c) {
      const RowCursor end_at = row_cursor<kStep>(c * kLanes - head, lead, p.row.step, p.walk);
      Chunk<Bits> values;
      if (live) {
        values = gather<kStep, false, Bits, Index>(src_row, src_stride, src_size, end_at.o,
                                                   end_at.r, step);
      }
      for (int e = 0; e < kLanes; ++e) {
        const Position j = end_at.first + e;
        if (j >= 0 && j < size) global_store(dst_row + j, values.get(e));
      }
    };
    for (chunk = lane; chunk < c_begin; chunk += lanes) write_end_chunk(chunk);
    for (chunk = c_end + ((lane - c_end) & (lanes - 1)); chunk < chunks; chunk += lanes) {
      write_end_chunk(chunk);
    }
  }
}

// The row a dense walk's thread stands in: where it starts and its
// interior, carried from chunk to chunk while the thread's chunks stay in
// the row.
template <typename Index, int kOuter>
struct DenseRow {
  Position row = 0;
  RowStart<Index> start{0, 0, false};
  RowSpan interior{0, 0};

  // Sets up row `row_index`: one division per outer dim.
  __device__ void set_up(const ScatterParams& p, Position row_index, Position step) {
    row = row_index;
    start = row_start<Index, kOuter>(p, row);
    interior = row_interior(p, start.live, step);
  }
};

// dst dense in walk order (rows back to back) as 16-byte chunks of its
// memory, in runs (DenseRun): the lanes of a warp on consecutive chunks,
// each thread kRunLanes chunks on from pass to pass. A chunk may hold the
// end of one row and the start of the next, so short rows, rows off a
// 16-byte boundary and the zeros around a row's values all go out in whole
// 16-byte stores; only the buffer's first and last chunk can be partial. A
// thread carries its row and row cursor from chunk to chunk by additions and
// pays a row's divisions only where its chunk starts in a later row. A
// chunk inside its row's interior goes as in the row walk (a 16-byte copy
// where the source is an aligned stride-1 run), others element by element,
// a comparison and additions each, paying the next row's divisions where
// they reach it.
template <typename Bits, typename Index, int kStep, int kOuter>
__global__ void __launch_bounds__(kThreadsPerBlock)
    scatter_dense_kernel(ScatterParams p, Position total) {
  constexpr int kLanes = Chunk<Bits>::kLanes;
  const Bits* src = static_cast<const Bits*>(p.src);
  Bits* dst = static_cast<Bits*>(p.dst);
  const Position size = static_cast<Position>(p.row.size.value);
  const Position lead = p.row.lead;
  const Position step = kStep ? kStep : static_cast<Position>(p.row.step.value);
  const Position src_size = p.row.src_size;
  const Index src_stride = static_cast<Index>(p.row.src_stride);
  // One position further, one chunk further, and from past one chunk to the
  // thread's next: quotients and remainders by step.
  const RowMove element_move = row_move<kStep>(1, p.row.step);
  const RowMove chunk_move = row_move<kStep>(kLanes, p.row.step);
  const RowMove hop = row_move<kStep>((kRunLanes - 1) * kLanes, p.row.step);
  // Chunk c holds dst elements c * kLanes - head ... + kLanes - 1.
  const Position head = row_head(dst);
  const Position chunks = (total + head + kLanes - 1) / kLanes;
  DenseRow<Index, kOuter> state;
  // Past the thread's last chunk in state.row: none yet, so the first pass sets up.
  RowCursor at{size, 0, 0};
  for (DenseRun run(p.passes, chunks); run.chunk < run.end; run.next()) {
    const Position first = run.chunk * kLanes - head;
    const Position begin = first < 0 ? 0 : first;  // the chunk's first element inside dst
    at.advance(hop, step);
    if (at.first >= size) {  // the chunk starts in a later row
      const Position row = divide_position(begin, p.row.size);
      state.set_up(p, row, step);
      // lane 0's position, before the row for dst's first chunk
      at = row_cursor<kStep>(first - row * size, lead, p.row.step, p.walk);
    }
    if (first >= 0 && at.first >= state.interior.begin && at.first + kLanes <= state.interior.end) {
      const Bits* src_row = src + state.start.src_offset;
      Chunk<Bits> values;
      if (kStep == 1 && state.start.live && src_stride == 1 && row_head(src_row + at.o) == 0) {
        values = load_chunk(src_row + at.o);
      } else if (state.start.live) {
        values = gather<kStep, true, Bits, Index>(src_row, src_stride, src_size, at.o, at.r, step);
      }
      store_chunk(dst + first, values);
      at.advance(chunk_move, step);
      continue;
    }
    // bit e: lane e is an element of dst
    const unsigned lanes = ((1u << kLanes) - 1) & (~0u << (begin - first)) &
                           (total - first < kLanes ? (1u << (total - first)) - 1 : ~0u);
    if (size >= kLanes) {
      // A chunk of at most two rows (rows of a chunk or longer): each row's
      // piece gathered as a row walk's end chunk is, lanes outside it masked.
      const Position split = size - at.first;  // lanes [0, split) lie in this row
      const unsigned here = split < kLanes ? lanes & ((1u << split) - 1) : lanes;
      Chunk<Bits> values =
          gather_piece<kStep>(src + state.start.src_offset, state.start.live, src_stride, src_size,
                              at.o, at.r, step, here);
      if (here != lanes) {  // the rest of the chunk starts the next row
        state.set_up(p, state.row + 1, step);
        at = row_cursor<kStep>(-split, lead, p.row.step, p.walk);
        const Chunk<Bits> next =
            gather_piece<kStep>(src + state.start.src_offset, state.start.live, src_stride,
                                src_size, at.o, at.r, step, lanes & ~here);
        values.merge(next);
      }
      store_lanes(dst, first, values, lanes);
      at.advance(chunk_move, step);
      continue;
    }
    Chunk<Bits> values;
    BWDCONV_NO_UNROLL
    for (int e = 0; e < kLanes; ++e) {
      const Position element = first + e;
      if (element >= begin && element < total && state.start.live && at.r == 0 && at.o >= 0 &&
          at.o < src_size) {
        values.put(e, global_load(src + state.start.src_offset + at.o * src_stride));
      }
      at.advance(element_move, step);
      if (at.first == size && element + 1 < total) {
        state.set_up(p, state.row + 1, step);
        at = row_cursor<kStep>(0, lead, p.row.step, p.walk);
      }
    }
    store_lanes(dst, first, values, lanes);
  }
}

// The dense walk where dst allows it (make_scatter_walk), else the row walk.
// A step-1 walk with four outer dims takes the run-time step (kStep 0): the
// fixed one holds too many scalar registers on AMD and spills.
template <typename Bits, typename Index, int kStep, int kOuter>
void launch_walk(const ScatterParams& p, NativeStream stream) {
  if constexpr (kStep != 1 || kOuter < kOuterDims) {
    const WalkKernels<ScatterParams> kernels{"scatter", scatter_kernel<Bits, Index, kStep, kOuter>,
                                             scatter_dense_kernel<Bits, Index, kStep, kOuter>};
    launch_walk_kernels<Chunk<Bits>::kLanes>(kernels, p, stream);
  }
}

}  // namespace

// The instantiation for the element width, the index width, the row's step
// (fixed_step, except as launch_walk says) and the outer dims.
template <Target target>
LaunchError launch_scatter(const ScatterParams& params, NativeStream stream) {
  if (params.rows == 0) return nullptr;
  const int step = params.row.step.value == 1 && params.outer_dims == kOuterDims
                       ? 0
                       : fixed_step(params.row.step.value);
  bool known = false;
  visit_walk(params.element_bytes, !params.wide_offsets, [&](auto bits, auto index) {
    visit_constant<0, 2>(step, [&](auto fixed) {
      known = visit_constant<1, kOuterDims>(params.outer_dims, [&](auto outer) {
        launch_walk<decltype(bits), decltype(index), decltype(fixed)::value,
                    decltype(outer)::value>(params, stream);
      });
    });
  });
  return known ? last_launch_error() : kInvalidLaunch;
}

BWDCONV_TARGET_FUNCTION(LaunchError, launch_scatter, kNoDeviceKernels, const ScatterParams&,
                        NativeStream);

}  // namespace bwdconv::hip
