#include "layout.h"

#include <algorithm>

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

}  // namespace bwdconv::hip
