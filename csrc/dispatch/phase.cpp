#include "phase.h"

#include <numeric>

namespace bwdconv {
namespace {

int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
int64_t ceil_div(int64_t a, int64_t b) { return -floor_div(-a, b); }

}  // namespace

bool Phase::empty() const {
  for (int i = 0; i < spatial_dims; ++i) {
    if (dims[i].tap_count == 0) return true;
  }
  return false;
}

bool Phase::has_no_slots() const {
  for (int i = 0; i < spatial_dims; ++i) {
    if (dims[i].slots() == 0) return true;
  }
  return false;
}

int64_t Phase::tap_count() const {
  int64_t taps = 1;
  for (int i = 0; i < spatial_dims; ++i) taps *= dims[i].tap_count;
  return taps;
}

PhaseDim make_phase_dim(int64_t input, int64_t filter, int64_t output, int64_t stride,
                        int64_t padding, int64_t dilation, int64_t residue) {
  PhaseDim pd;
  pd.residue = residue;
  pd.dst_stride = stride;
  const int64_t g = std::gcd(dilation, stride);
  pd.tap_step = stride / g;
  pd.sub_dilation = dilation / g;
  // k*d = r (mod s) has a solution iff g divides r; the solutions repeat every s/g.
  pd.first_tap = -1;
  for (int64_t k = 0; k < pd.tap_step && k < filter; ++k) {
    if ((k * dilation - residue) % stride == 0) {
      pd.first_tap = k;
      break;
    }
  }
  if (pd.first_tap >= 0) {
    pd.tap_count = (filter - 1 - pd.first_tap) / pd.tap_step + 1;
  } else {
    pd.first_tap = 0;
    pd.tap_count = 0;
  }
  // Slots: 0 <= s*q + r - p <= I - 1.
  pd.q_begin = ceil_div(padding - residue, stride);
  pd.q_end = floor_div(input - 1 + padding - residue, stride) + 1;
  if (pd.q_end < pd.q_begin) pd.q_end = pd.q_begin;
  pd.dst_offset = stride * pd.q_begin + residue - padding;
  if (pd.tap_count > 0) {
    const int64_t first_m = (pd.first_tap * dilation - residue) / stride;
    pd.conv_padding = first_m + (pd.tap_count - 1) * pd.sub_dilation;
    pd.conv_output = output + 2 * pd.conv_padding - pd.sub_dilation * (pd.tap_count - 1);
    pd.computed_end = std::max(pd.q_begin, std::min(pd.q_end, pd.conv_output));
  } else {
    pd.computed_end = pd.q_begin;
  }
  return pd;
}

std::vector<Phase> enumerate_phases(const ConvGeometry& g) {
  int64_t count = 1;
  for (int i = 0; i < g.spatial_dims; ++i) count *= g.stride[i];
  std::vector<Phase> phases(count);
  for (int64_t index = 0; index < count; ++index) {
    Phase& phase = phases[index];
    phase.spatial_dims = g.spatial_dims;
    int64_t rest = index;
    for (int i = g.spatial_dims - 1; i >= 0; --i) {
      const int64_t residue = rest % g.stride[i];
      rest /= g.stride[i];
      phase.dims[i] = make_phase_dim(g.input[i], g.filter[i], g.output[i], g.stride[i],
                                     g.padding[i], g.dilation[i], residue);
    }
  }
  return phases;
}

}  // namespace bwdconv
