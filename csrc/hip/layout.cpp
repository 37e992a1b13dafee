#include "layout.h"

#include <algorithm>
#include <vector>

#include "index.h"
#include "launch.h"

namespace bwdconv::hip {

Divisor make_divisor(int64_t value) {
  Divisor divisor;
  divisor.value = static_cast<uint32_t>(value);
  divisor.magic = 0;
  if (value >= 1 && value < kNarrowLimit) {  // the constants params.h's Divisor describes
    uint32_t shift = 0;
    while ((int64_t{1} << shift) < value) ++shift;
    const uint64_t excess = (uint64_t{1} << shift) - static_cast<uint64_t>(value);
    divisor.magic = static_cast<uint32_t>((excess << 32) / static_cast<uint64_t>(value) + 1);
    divisor.shift = shift;
  }
  return divisor;
}

namespace {

// A dim of the scatter walk before it becomes a ScatterWalkDim.
struct WalkDim {
  int64_t size, dst_stride, src_stride, lead, step, src_size;
  bool one_to_one() const { return lead == 0 && step == 1 && src_size == size; }
  bool reads_origin() const { return lead == 0 && src_size >= 1; }
};

ScatterWalkDim walk_dim(const WalkDim& d) {
  ScatterWalkDim dim;
  dim.dst_stride = d.dst_stride;
  dim.src_stride = d.src_stride;
  dim.size = make_divisor(d.size);
  dim.step = make_divisor(d.step);
  dim.lead = static_cast<int32_t>(d.lead);
  dim.src_size = static_cast<int32_t>(d.src_size);
  return dim;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Outer dims in walk order: dropped where they change nothing, merged where
// both tensors step over a one-to-one dim whole. The kernel maps the
// outermost one to one (no division for its source position), so a
// one-to-one dim of size 1 goes first where the outermost is not, or there
// is none.
std::vector<WalkDim> outer_walk(std::vector<WalkDim> dims) {
  dims.erase(std::remove_if(dims.begin(), dims.end(),
                            [](const WalkDim& d) { return d.size == 1 && d.reads_origin(); }),
             dims.end());
  std::stable_sort(dims.begin(), dims.end(),
                   [](const WalkDim& a, const WalkDim& b) { return a.dst_stride > b.dst_stride; });
  std::vector<WalkDim> outer;
  for (const WalkDim& d : dims) {
    WalkDim* last = outer.empty() ? nullptr : &outer.back();
    if (last && last->one_to_one() && d.one_to_one() && last->dst_stride == d.size * d.dst_stride &&
        last->src_stride == d.size * d.src_stride) {
      const int64_t size = last->size * d.size;
      *last = d;
      last->size = last->src_size = size;
    } else {
      outer.push_back(d);
    }
  }
  if (outer.empty() || !outer.front().one_to_one()) outer.insert(outer.begin(), {1, 0, 0, 0, 1, 1});
  return outer;
}

// Every position, source position and row index of the walk below 2^31.
bool positions_fit(const std::vector<WalkDim>& outer, const WalkDim& row, int64_t lanes) {
  constexpr int64_t kQuarter = kNarrowLimit / 4;
  bool fits = row.size < kQuarter && row.lead < kQuarter && -row.lead < kQuarter &&
              row.step < kQuarter && row.src_size < kQuarter &&
              row.step * row.src_size < kQuarter && lanes < kQuarter;
  int64_t rows = 1;
  for (const WalkDim& d : outer) {
    rows *= d.size;
    fits = fits && d.size < kQuarter && d.step < kQuarter && d.src_size < kQuarter &&
           d.lead < kQuarter && -d.lead < kQuarter && rows < kNarrowLimit;
  }
  return fits;
}

// Whether element offsets into a view may reach 2^31.
bool wide_offsets(const TensorView& view) {
  int64_t last = 0;
  for (int d = 0; d < view.dims; ++d) last += (view.sizes[d] - 1) * view.strides[d];
  return last + 16 >= kNarrowLimit;
}

}  // namespace

RowWalk make_row_walk(int64_t size, int64_t lead, int64_t step, int element_bytes) {
  const int64_t lanes = 16 / element_bytes;
  RowWalk walk;
  walk.chunks_per_row = ceil_div(size + lanes - 1, lanes);
  // Threads per row: a power of two up to 32 giving each about four chunks,
  // and two for any row of a 32-byte sector or more, so that a warp's chunk
  // stores fill whole sectors (first_chunk, row_chunks.h).
  walk.lane_shift = size * element_bytes >= 32 ? 1 : 0;
  while (walk.lane_shift < 5 && (int64_t{8} << walk.lane_shift) <= walk.chunks_per_row) {
    ++walk.lane_shift;
  }
  walk.bias = step * std::max<int64_t>(ceil_div(lead + lanes, step), 0);
  walk.bias_quotient = walk.bias / step;
  const int64_t advance = lanes << walk.lane_shift;
  walk.advance_quotient = advance / step;
  walk.advance_remainder = advance % step;
  return walk;
}

namespace {

// Whether dst is dense in walk order: the row is stride 1 and each outer dim
// steps over everything inside it, so row r starts at element r * row size.
// Dim: WalkDim or InterleaveDim.
template <typename Dim>
bool dense_in_walk_order(const std::vector<Dim>& outer, const Dim& row) {
  int64_t inner = row.size;
  if (row.size > 1 && row.dst_stride != 1) return false;
  for (auto d = outer.rbegin(); d != outer.rend(); ++d) {
    if (d->size > 1 && d->dst_stride != inner) return false;
    inner *= d->size;
  }
  return true;
}

// Takes the walk's row out of `dims`: dst's stride-1 dim, or a size-1 dim
// when every dim has size 1. False when there is neither. Dim: WalkDim or
// InterleaveDim.
template <typename Dim>
bool take_row(std::vector<Dim>& dims, Dim* row) {
  auto at = std::find_if(dims.begin(), dims.end(),
                         [](const Dim& d) { return d.dst_stride == 1 && d.size > 1; });
  if (at == dims.end()) {
    at = std::find_if(dims.begin(), dims.end(), [](const Dim& d) { return d.size == 1; });
    if (at == dims.end()) return false;
  }
  *row = *at;
  dims.erase(at);
  return true;
}

}  // namespace

bool make_scatter_walk(const TensorView& src, const TensorView& dst, const int64_t* stride,
                       const int64_t* lead, int element_bytes, ScatterParams* p) {
  std::vector<WalkDim> dims;
  for (int d = 0; d < dst.dims; ++d) {
    const bool spatial = d >= 2;
    dims.push_back({dst.sizes[d], dst.strides[d], src.strides[d], spatial ? lead[d - 2] : 0,
                    spatial ? stride[d - 2] : 1, src.sizes[d]});
  }
  WalkDim row_dim;
  if (!take_row(dims, &row_dim)) return false;
  const std::vector<WalkDim> outer = outer_walk(dims);
  const int64_t lanes = 16 / element_bytes;
  if (outer.size() > static_cast<size_t>(kOuterDims) || !positions_fit(outer, row_dim, lanes)) {
    return false;
  }
  ScatterParams q;
  q.src = p->src;
  q.dst = p->dst;
  q.rows = 1;
  for (size_t k = 0; k < outer.size(); ++k) {
    q.outer[k] = walk_dim(outer[k]);
    q.rows *= outer[k].size;
  }
  q.outer_dims = static_cast<int>(outer.size());
  q.row = walk_dim(row_dim);
  q.walk = make_row_walk(row_dim.size, row_dim.lead, row_dim.step, element_bytes);
  q.element_bytes = element_bytes;
  q.wide_offsets = wide_offsets(src) || wide_offsets(dst);
  q.dense = dense_in_walk_order(outer, row_dim) && q.rows * row_dim.size + 2 * lanes < kNarrowLimit;
  *p = q;
  return true;
}

namespace {

// A dim of the interleave walk before it becomes an InterleaveWalkDim: its
// dx side and, per phase of the launch, the result's stride and extent.
struct InterleaveDim {
  int64_t size = 1, dst_stride = 0, step = 1, padding = 0, phase_weight = 0;
  int64_t src_stride[kMaxPhasesPerLaunch] = {};
  int64_t extent[kMaxPhasesPerLaunch] = {};
  bool plain() const { return step == 1 && padding == 0 && phase_weight == 0; }
};

// The dims of dx in logical order: batch, channels (groups and channels per
// group when the results keep groups apart), spatial dims.
std::vector<InterleaveDim> interleave_dims(const InterleaveLaunch& l) {
  const TensorView& dx = l.dst_view;
  const auto plain = [&](int64_t size, int64_t dst_stride, auto src_stride) {
    InterleaveDim d;
    d.size = size;
    d.dst_stride = dst_stride;
    for (int e = 0; e < l.phase_count; ++e) {
      d.src_stride[e] = src_stride(l.phases[e]);
      d.extent[e] = size;
    }
    return d;
  };
  std::vector<InterleaveDim> dims;
  dims.push_back(plain(dx.sizes[0], dx.strides[0], [](const PhaseResult& r) { return r.strides[0]; }));
  const int64_t per_group = l.channels_per_group, groups = dx.sizes[1] / per_group;
  if (groups > 1) {
    dims.push_back(plain(groups, per_group * dx.strides[1],
                         [&](const PhaseResult&) { return l.group_stride; }));
  }
  dims.push_back(plain(per_group, dx.strides[1], [](const PhaseResult& r) { return r.strides[1]; }));
  const int spatial = dx.dims - 2;
  for (int i = 0; i < spatial; ++i) {
    InterleaveDim d;
    d.size = dx.sizes[2 + i];
    d.dst_stride = dx.strides[2 + i];
    d.step = l.stride[i];
    d.padding = l.padding[i];
    d.phase_weight = 1;  // residues row-major, last dim fastest
    for (int k = i + 1; k < spatial; ++k) d.phase_weight *= l.stride[k];
    const int64_t slots = (d.size - 1 + d.padding) / d.step + 1;  // every slot dx holds
    for (int e = 0; e < l.phase_count; ++e) {
      d.src_stride[e] = l.phases[e].strides[2 + i];
      d.extent[e] = std::min(l.phases[e].sizes[2 + i], slots);
    }
    dims.push_back(d);
  }
  return dims;
}

// Folds a size-1 dim (position 0: slot padding div step, residue padding
// mod step) into the phases: their data moves to the slot, a slot past a
// result makes it a zero, the residue moves the launch's first phase.
void fold_single(const InterleaveDim& d, int element_bytes, InterleaveLaunch& l) {
  const int64_t q = d.padding / d.step, r = d.padding % d.step;
  l.first_phase -= static_cast<int>(r * d.phase_weight);
  for (int e = 0; e < l.phase_count; ++e) {
    PhaseResult& result = l.phases[e];
    if (result.write != PhaseWrite::Copy) continue;
    if (q >= d.extent[e]) {
      result.write = PhaseWrite::Zero;
    } else {
      result.data = static_cast<const char*>(result.data) + q * d.src_stride[e] * element_bytes;
    }
  }
}

// Whether outer dim a and the next inner dim b are one dim of size
// a.size * b.size for dx and every result the launch copies from.
bool mergeable(const InterleaveDim& a, const InterleaveDim& b, const InterleaveLaunch& l) {
  bool merge = a.plain() && b.plain() && a.dst_stride == b.size * b.dst_stride;
  for (int e = 0; e < l.phase_count; ++e) {
    merge = merge && (l.phases[e].write != PhaseWrite::Copy ||
                      a.src_stride[e] == b.size * b.src_stride[e]);
  }
  return merge;
}

InterleaveWalkDim interleave_walk_dim(const InterleaveDim& d) {
  InterleaveWalkDim dim;
  dim.dst_stride = d.dst_stride;
  dim.size = make_divisor(d.size);
  dim.step = make_divisor(d.step);
  dim.padding = static_cast<int32_t>(d.padding);
  dim.phase_weight = static_cast<int32_t>(d.phase_weight);
  return dim;
}

bool interleave_positions_fit(const std::vector<InterleaveDim>& dims) {
  constexpr int64_t kQuarter = kNarrowLimit / 4;
  bool fits = true;
  int64_t elements = 1;
  for (const InterleaveDim& d : dims) {
    elements *= d.size;
    fits = fits && d.size + d.padding + d.step < kQuarter && elements < kNarrowLimit;
  }
  return fits;
}

// The largest element offset a walk dim list reaches in dx or in result e.
int64_t last_offset(const std::vector<InterleaveDim>& dims, int e) {
  int64_t last = 0;
  for (const InterleaveDim& d : dims) {
    const int64_t reach = e < 0 ? d.size : d.extent[e];
    const int64_t stride = e < 0 ? d.dst_stride : d.src_stride[e];
    last += std::max<int64_t>(reach - 1, 0) * (stride < 0 ? -stride : stride);
  }
  return last;
}

}  // namespace

bool make_interleave_walk(const InterleaveLaunch& launch, InterleaveParams* p) {
  InterleaveLaunch l = launch;
  std::vector<InterleaveDim> dims = interleave_dims(l);
  if (!interleave_positions_fit(dims)) return false;
  InterleaveDim row_dim;
  if (!take_row(dims, &row_dim)) return false;
  std::vector<InterleaveDim> outer;
  for (const InterleaveDim& d : dims) {
    if (d.size == 1) {
      fold_single(d, l.element_bytes, l);
    } else {
      outer.push_back(d);
    }
  }
  std::stable_sort(outer.begin(), outer.end(), [](const InterleaveDim& a, const InterleaveDim& b) {
    return a.dst_stride > b.dst_stride;
  });
  std::vector<InterleaveDim> merged;
  for (const InterleaveDim& d : outer) {
    if (!merged.empty() && mergeable(merged.back(), d, l)) {
      const int64_t size = merged.back().size * d.size;
      merged.back() = d;
      merged.back().size = size;
      for (int e = 0; e < l.phase_count; ++e) merged.back().extent[e] = size;
    } else {
      merged.push_back(d);
    }
  }
  // The kernel takes the outermost dim as plain (no division for its slot):
  // one of size 1 goes first where the outermost is not, or there is none.
  if (merged.empty() || !merged.front().plain()) {
    merged.insert(merged.begin(), InterleaveDim{});
    std::fill(merged.front().extent, merged.front().extent + kMaxPhasesPerLaunch, 1);
  }
  if (merged.size() > static_cast<size_t>(kInterleaveOuterDims)) return false;
  InterleaveParams q;
  q.dst = l.dst;
  q.rows = 1;
  q.wide_offsets = l.wide_offsets;
  std::vector<InterleaveDim> walked = merged;
  walked.push_back(row_dim);
  q.wide_offsets = q.wide_offsets || last_offset(walked, -1) + 16 >= kNarrowLimit;
  for (size_t k = 0; k < merged.size(); ++k) {
    q.outer[k] = interleave_walk_dim(merged[k]);
    q.rows *= merged[k].size;
  }
  q.outer_dims = static_cast<int>(merged.size());
  q.row = interleave_walk_dim(row_dim);
  q.walk = make_row_walk(row_dim.size, -row_dim.padding, row_dim.step, l.element_bytes);
  q.first_phase = l.first_phase;
  q.phase_count = l.phase_count;
  for (int e = 0; e < l.phase_count; ++e) {
    PhaseSource& source = q.phases[e];
    source.write = l.phases[e].write;
    if (source.write != PhaseWrite::Copy) continue;
    source.data = l.phases[e].data;
    for (size_t k = 0; k < merged.size(); ++k) {
      source.strides[k] = merged[k].src_stride[e];
      source.extent[k] = static_cast<int32_t>(merged[k].extent[e]);
    }
    source.row_stride = row_dim.src_stride[e];
    source.row_extent = static_cast<int32_t>(row_dim.extent[e]);
    q.wide_offsets = q.wide_offsets || last_offset(walked, e) + 16 >= kNarrowLimit;
  }
  q.element_bytes = l.element_bytes;
  q.dense = dense_in_walk_order(merged, row_dim) &&
            q.rows * row_dim.size + 32 / l.element_bytes < kNarrowLimit;
  *p = q;
  return true;
}

}  // namespace bwdconv::hip
