// tap_gemm: swap1x1's epilogue writer as one kernel. The GEMM of the taps'
// filter with grad_output, whose epilogue writes every product straight into
// its dx element and the holes around it: no small result stored and read
// back, no interleave pass (docs/DESIGN.md, "swap1x1").
#pragma once

#include "params.h"
#include "portability.h"

namespace bwdconv::hip {

// Taps one block's rows can hold: a block's 64 GEMM rows are whole
// channels, all of each channel's taps (the epilogue writes a channel's
// neighbouring taps together).
constexpr int kTapGemmMaxTaps = 64;
// dx positions per grad_output position (the product of the strides) a
// block's epilogue writes at most: a block's cells then stay below 2^31
// elements.
constexpr int64_t kTapGemmMaxCell = int64_t{1} << 16;

// Runs the GEMM on the device (enqueued on `stream`) or on the host grid
// (csrc/hip/host/, synchronously); returns the launch error, if any: on a
// device without warp matrix products (ROCm, or CUDA before sm_80), on
// elements other than float16 and bfloat16, on more than kTapGemmMaxTaps
// taps, or on strides whose product passes kTapGemmMaxCell.
template <Target target>
LaunchError launch_tap_gemm(const TapGemmParams& params, NativeStream stream);

}  // namespace bwdconv::hip
