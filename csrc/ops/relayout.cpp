#include "ops/precompiled.h"  // first, as the precompiled header must be

#include "ops/relayout.h"

#include <string>

#include "ops/aten.h"
#include "ops/weight_cache.h"

namespace bwdconv::ops {
namespace {

at::MemoryFormat channels_last_of(const at::Tensor& t) {
  return t.dim() == 5 ? at::MemoryFormat::ChannelsLast3d : at::MemoryFormat::ChannelsLast;
}

}  // namespace

at::Tensor relayout_grad_input(const Plan& plan, const at::Tensor& grad_output,
                               const at::Tensor& weight, at::MemoryFormat format) {
  const at::MemoryFormat last = channels_last_of(grad_output);
  const at::Tensor filter = cached_filter(
      weight, [] { return std::string("relayout channels_last"); },
      [&] { return weight.contiguous(last); });
  return aten_grad_input(plan, grad_output.contiguous(last), filter, last).contiguous(format);
}

at::Tensor relayout_grad_weight(const Plan& plan, const at::Tensor& grad_output,
                                const at::Tensor& input, at::MemoryFormat format) {
  const at::MemoryFormat last = channels_last_of(grad_output);
  return aten_grad_weight(plan, grad_output.contiguous(last), input.contiguous(last), last)
      .contiguous(format);
}

}  // namespace bwdconv::ops
