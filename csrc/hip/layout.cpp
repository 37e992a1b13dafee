#include "layout.h"

#include <algorithm>

namespace bwdconv::hip {

Step make_step(int64_t value) {
  Step step;
  step.value = value;
  step.shift = -1;
  for (int shift = 0; shift < 63; ++shift) {
    if ((int64_t{1} << shift) == value) step.shift = shift;
  }
  return step;
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
  widen_strides(view.strides, view.dims, k);
}

void widen_strides(int64_t* strides, int dims, int64_t k) {
  for (int d = 0; d < dims; ++d) {
    if (d != 1) strides[d] /= k;
  }
}

}  // namespace bwdconv::hip
