// Prints splitk's kernel-path layout (csrc/dispatch/splitk.h,
// make_splitk_gemm_layout) for one convolution and device as JSON, so that
// scripts/kernel_report.py models the planner's own chunks and steps.
//   splitk_layout DIMS N IN_CHANNELS OUT_CHANNELS GROUPS UNITS STAGED_BYTES PARTIAL_BYTES
//                 then per spatial dim: INPUT FILTER STRIDE PADDING DILATION
#include <cstdio>
#include <cstdlib>

#include "dispatch/splitk.h"

int main(int argc, char** argv) {
  using namespace bwdconv;
  if (argc < 9) return 2;
  const auto arg = [&](int i) { return std::atoll(argv[i]); };
  ConvGeometry g;
  g.spatial_dims = static_cast<int>(arg(1));
  if (g.spatial_dims < 1 || g.spatial_dims > 3 || argc != 9 + 5 * g.spatial_dims) return 2;
  g.batch = arg(2);
  g.in_channels = arg(3);
  g.out_channels = arg(4);
  g.groups = arg(5);
  g.filter_in_channels = g.in_channels / g.groups;
  for (int d = 0; d < g.spatial_dims; ++d) {
    g.input[d] = arg(9 + 5 * d);
    g.filter[d] = arg(10 + 5 * d);
    g.stride[d] = arg(11 + 5 * d);
    g.padding[d] = arg(12 + 5 * d);
    g.dilation[d] = arg(13 + 5 * d);
  }
  derive_output_sizes(g);
  const SplitKGemmLimits limits;
  const SplitKGemmLayout l = make_splitk_gemm_layout(g, arg(6), arg(7), arg(8), limits);
  std::printf(
      "{\"chunks\": %lld, \"batch_per_chunk\": %lld, \"batch_chunks\": %lld, "
      "\"rows_per_chunk\": %lld, \"space_chunks\": %lld, \"offset_taps\": %lld, "
      "\"staged_taps\": %lld, \"halo_rows\": %lld, \"step_rows\": %lld, "
      "\"tiles_per_chunk\": %lld, \"staging_cap_bytes\": %lld, \"partial_cap_bytes\": %lld, "
      "\"gemm_tile\": %lld}\n",
      static_cast<long long>(l.chunks()), static_cast<long long>(l.batch_per_chunk),
      static_cast<long long>(l.batch_chunks), static_cast<long long>(l.rows_per_chunk),
      static_cast<long long>(l.space_chunks), static_cast<long long>(l.offset_taps),
      static_cast<long long>(l.staged_taps), static_cast<long long>(l.halo_rows),
      static_cast<long long>(l.step_rows),
      static_cast<long long>(splitk_chunk_tiles(g, l, limits)),
      static_cast<long long>(splitk_staging_cap(arg(6), limits)),
      static_cast<long long>(limits.partial_bytes),
      static_cast<long long>(limits.gemm_tile));
  return 0;
}
