#include "layout.h"

#include <algorithm>
#include <vector>

#include "index.h"

namespace bwdconv::hip {

Step make_step(int64_t value) {
  Step step;
  step.value = value;
  step.shift = -1;
  for (int shift = 0; shift < 63; ++shift) {
    if ((int64_t{1} << shift) == value) step.shift = shift;
  }
  if (value >= 1 && value < kNarrowLimit) {  // narrow_quotient's constants (index.h)
    int l = 0;
    while ((int64_t{1} << l) < value) ++l;
    const uint64_t excess = (uint64_t{1} << l) - static_cast<uint64_t>(value);
    step.magic = static_cast<uint32_t>((excess << 32) / static_cast<uint64_t>(value) + 1);
    step.magic_shift = l;
  }
  return step;
}

namespace {

// A size as a divisor; a size 0 divides as 1 (such a view has nothing to walk).
Step size_step(int64_t size) { return make_step(std::max<int64_t>(size, 1)); }

}  // namespace

void set_size_steps(TensorView& view) {
  for (int d = 0; d < view.dims; ++d) view.size_steps[d] = size_step(view.sizes[d]);
}

void walk_in_memory_order(TensorView& view) {
  std::stable_sort(view.order, view.order + view.dims, [&view](int a, int b) {
    const bool a_single = view.sizes[a] == 1, b_single = view.sizes[b] == 1;
    if (a_single != b_single) return a_single;
    return !a_single && view.strides[a] > view.strides[b];
  });
}

int64_t packet_elements(int element_bytes, const std::vector<int64_t>& multiples,
                        const std::vector<uintptr_t>& addresses) {
  for (int64_t k = 16 / element_bytes; k > 1; k /= 2) {
    bool fits = true;
    for (const int64_t m : multiples) fits = fits && m % k == 0;
    for (const uintptr_t a : addresses) fits = fits && a % static_cast<uintptr_t>(k * element_bytes) == 0;
    if (fits) return k;
  }
  return 1;
}

void widen_channels(TensorView& view, int64_t k) {
  view.sizes[1] /= k;
  view.size_steps[1] = size_step(view.sizes[1]);
  widen_strides(view.strides, view.dims, k);
}

void widen_strides(int64_t* strides, int dims, int64_t k) {
  for (int d = 0; d < dims; ++d) {
    if (d != 1) strides[d] /= k;
  }
}

Divisor make_divisor(int64_t value) {
  const Step step = make_step(value);
  Divisor divisor;
  divisor.value = static_cast<uint32_t>(value);
  divisor.magic = step.magic;
  divisor.shift = static_cast<uint32_t>(step.magic_shift);
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
// both tensors step over a one-to-one dim whole.
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
  if (outer.empty()) outer.push_back({1, 0, 0, 0, 1, 1});
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

bool make_scatter_walk(const TensorView& src, const TensorView& dst, const int64_t* stride,
                       const int64_t* lead, int element_bytes, ScatterParams* p) {
  std::vector<WalkDim> dims;
  for (int d = 0; d < dst.dims; ++d) {
    const bool spatial = d >= 2;
    dims.push_back({dst.sizes[d], dst.strides[d], src.strides[d], spatial ? lead[d - 2] : 0,
                    spatial ? stride[d - 2] : 1, src.sizes[d]});
  }
  // The row: dst's stride-1 dim, or a size-1 dim when every dim has size 1.
  auto row = std::find_if(dims.begin(), dims.end(),
                          [](const WalkDim& d) { return d.dst_stride == 1 && d.size > 1; });
  if (row == dims.end()) {
    row = std::find_if(dims.begin(), dims.end(), [](const WalkDim& d) { return d.size == 1; });
    if (row == dims.end()) return false;
  }
  const WalkDim row_dim = *row;
  dims.erase(row);
  const std::vector<WalkDim> outer = outer_walk(dims);
  const int64_t lanes = 16 / element_bytes;
  if (outer.size() > static_cast<size_t>(kOuterDims) ||
      (outer.size() == static_cast<size_t>(kOuterDims) && !outer.front().one_to_one()) ||
      !positions_fit(outer, row_dim, lanes)) {
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
  q.chunks_per_row = ceil_div(row_dim.size + lanes - 1, lanes);
  // Threads per row: a power of two up to 32 giving each about four chunks.
  while (q.lane_shift < 5 && (int64_t{8} << q.lane_shift) <= q.chunks_per_row) ++q.lane_shift;
  q.row_bias = row_dim.step * std::max<int64_t>(ceil_div(row_dim.lead + lanes, row_dim.step), 0);
  q.row_bias_quotient = q.row_bias / row_dim.step;
  const int64_t advance = lanes << q.lane_shift;
  q.advance_quotient = advance / row_dim.step;
  q.advance_remainder = advance % row_dim.step;
  q.element_bytes = element_bytes;
  q.wide_offsets = wide_offsets(src) || wide_offsets(dst);
  *p = q;
  return true;
}

}  // namespace bwdconv::hip
