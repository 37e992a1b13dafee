#include "ops/precompiled.h"  // first, as the precompiled header must be

#include "ops/relayout.h"

#include <c10/util/accumulate.h>

#include <string>

#include "hip/relayout.h"
#include "ops/aten.h"
#include "ops/kernels.h"
#include "ops/filter.h"

namespace bwdconv::ops {
namespace {

at::MemoryFormat channels_last_of(const at::Tensor& t) {
  return t.dim() == 5 ? at::MemoryFormat::ChannelsLast3d : at::MemoryFormat::ChannelsLast;
}

// Whether relayout's kernel serves `t` where kernels run: on a GPU in a
// build with its kernels, on the CPU when switched on (kernels_on_host).
bool kernel_serves(const at::Tensor& t) {
#if defined(BWDCONV_WITH_GPU_KERNELS)
  return runs_kernels(t);
#else
  return t.is_cpu() && runs_kernels(t);
#endif
}

// `t`, dense in one of the layouts, in `format`: by the transpose kernel
// (csrc/hip/relayout.cu) where it serves, as the batch of [C, H*W] matrices
// NCHW holds (rows C) or of [H*W, C] ones channels_last holds (rows H*W);
// else, and for any other strides, by ATen's copy, which reads one side of
// the transpose in scattered elements (docs/DESIGN.md, "relayout").
at::Tensor converted(const at::Tensor& t, at::MemoryFormat format) {
  if (t.is_contiguous(format)) return t;
  const bool to_channels_last = format == channels_last_of(t);
  if (!to_channels_last && format != at::MemoryFormat::Contiguous) return t.contiguous(format);
  const bool dense = to_channels_last ? t.is_contiguous() : t.is_contiguous(channels_last_of(t));
  const int64_t bytes = static_cast<int64_t>(t.element_size());
  if (!kernel_serves(t) || !dense || (bytes != 2 && bytes != 4 && bytes != 8)) {
    return t.contiguous(format);
  }
  at::Tensor result = at::empty(t.sizes(), t.options().memory_format(format));
  const int64_t channels = t.size(1), positions = c10::multiply_integers(t.sizes().slice(2));
  hip::RelayoutParams p;
  p.src = t.const_data_ptr();
  p.dst = result.mutable_data_ptr();
  p.batches = t.size(0);
  p.rows = to_channels_last ? channels : positions;
  p.columns = to_channels_last ? positions : channels;
  p.src_row_stride = p.columns;
  p.src_batch_stride = channels * positions;
  p.dst_column_stride = p.rows;
  p.dst_batch_stride = channels * positions;
  p.element_bytes = static_cast<int>(bytes);
  run_kernel("relayout", t, [&](auto target, hip::NativeStream stream) {
    return hip::launch_relayout<decltype(target)::value>(p, stream);
  });
  return result;
}

}  // namespace

// Each gradient is computed in channels_last from its operands' copies,
// which are released before it is converted back: the copies, aten's
// result and its conversion are not all held at once (docs/DESIGN.md,
// "relayout", memory).
at::Tensor relayout_grad_input(const Plan& plan, const at::Tensor& grad_output,
                               const at::Tensor& weight, at::MemoryFormat format) {
  const at::MemoryFormat last = channels_last_of(grad_output);
  at::Tensor grad_input;
  {
    const at::Tensor filter = cached_filter(
        weight, [] { return std::string("relayout channels_last"); },
        [&] { return converted(weight, last); });
    grad_input = aten_grad_input(plan, converted(grad_output, last), filter, last);
  }
  return converted(grad_input, format);
}

at::Tensor relayout_grad_weight(const Plan& plan, const at::Tensor& grad_output,
                                const at::Tensor& input, at::MemoryFormat format) {
  const at::MemoryFormat last = channels_last_of(grad_output);
  const at::Tensor grad_weight =
      aten_grad_weight(plan, converted(grad_output, last), converted(input, last), last);
  return converted(grad_weight, format);
}

}  // namespace bwdconv::ops
