// A planted bug for the sanitizer checks (CMakeLists.txt): the scatter kernel
// with every store moved one element further, so that the last one lands one
// element past the end of dst. Built with -fsanitize=address, the run must
// report a heap-buffer-overflow; CTest checks that it does.
#define BWDCONV_HOST_TARGET 1
#include "hip/portability.h"

namespace bwdconv::hip {

template <typename T>
void store_one_further(T* address, const T& value) {
  global_store(address + 1, value);
}

}  // namespace bwdconv::hip

#define global_store store_one_further
#include "hip/scatter.cu"
#undef global_store

#include <vector>

#include "hip/layout.h"

int main() {
  using namespace bwdconv::hip;
  // dst [1, 1, 8] from src [1, 1, 4] at stride 2.
  std::vector<float> src{1, 2, 3, 4};
  std::vector<float> dst(8);
  TensorView src_view, dst_view;
  for (auto [view, size] : {std::pair{&src_view, int64_t{4}}, {&dst_view, int64_t{8}}}) {
    view->dims = 3;
    view->sizes[0] = view->sizes[1] = 1;
    view->sizes[2] = size;
    view->strides[0] = view->strides[1] = size;
    view->strides[2] = 1;
  }
  const int64_t stride[1] = {2}, lead[1] = {0};
  ScatterParams p;
  if (!make_scatter_walk(src_view, dst_view, stride, lead, sizeof(float), &p)) return 1;
  p.src = src.data();
  p.dst = dst.data();
  return launch_scatter<Target::host>(p, nullptr) == nullptr ? 0 : 1;
}
