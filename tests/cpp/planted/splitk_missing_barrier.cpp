// A planted bug for the sanitizer checks (CMakeLists.txt): splitk's tile loop
// without its second barrier (between staging the operand tiles in shared
// memory and reading them), so lanes read tile entries other lanes are still
// writing. Built with -fsanitize=thread, the run must report a data race;
// CTest checks that it does.
#define BWDCONV_HOST_TARGET 1
#include "hip/portability.h"

namespace bwdconv::hip::planted {

// Every lane of a block reaches the same barriers in the same order: the
// tile loop's three per step, of which this skips the second.
inline thread_local int64_t barriers_reached = 0;

inline void sync_threads_but_the_second_of_three() {
  if (barriers_reached++ % 3 != 1) host::sync_threads();
}

}  // namespace bwdconv::hip::planted

#undef __syncthreads
#define __syncthreads() ::bwdconv::hip::planted::sync_threads_but_the_second_of_three()
#include "hip/splitk.cu"

#include <vector>

#include "hip/element.h"
#include "hip/layout.h"

int main() {
  using namespace bwdconv::hip;
  // dw [4, 2, 3] of a 1-D convolution: x [2, 2, 20], dy [2, 4, 18], one chunk.
  std::vector<float> x(2 * 2 * 20, 1.0f), dy(2 * 4 * 18, 1.0f);
  std::vector<float> partials(4 * 2 * 3), weight(4 * 2 * 3);
  SplitKParams p;
  p.grad_output = dy.data();
  p.input = x.data();
  p.partials = partials.data();
  p.grad_weight = weight.data();
  const int64_t dy_sizes[3] = {2, 4, 18}, x_sizes[3] = {2, 2, 20};
  for (auto [view, sizes] : {std::pair{&p.grad_output_view, dy_sizes}, {&p.input_view, x_sizes}}) {
    view->dims = 3;
    for (int d = 0; d < 3; ++d) view->sizes[d] = sizes[d];
    view->strides[2] = 1;
    view->strides[1] = sizes[2];
    view->strides[0] = sizes[1] * sizes[2];
    walk_in_memory_order(*view);
    set_size_steps(*view);
  }
  p.spatial_dims = 1;
  p.filter[0] = 3;
  p.stride[0] = p.dilation[0] = 1;
  p.out_per_group = 4;
  p.in_per_group = 2;
  p.taps = 3;
  p.columns = 6;
  p.reduction = 2 * 18;
  p.chunks = 1;
  p.element = static_cast<int>(ElementType::Float32);
  return launch_splitk<Target::host>(p, nullptr) == nullptr ? 0 : 1;
}
