// The "aten" scope: bwdconv's kernels registered for aten::convolution (whose
// transposed forward it plans) and aten::convolution_backward at the CPU and
// CUDA keys, so every convolution backward and transposed forward in the
// process (eager autograd, torch.compile's extern calls) is planned by bwdconv.
#pragma once

namespace bwdconv::ops {

void enable_aten_scope();
void disable_aten_scope();
bool aten_scope_enabled();

}  // namespace bwdconv::ops
