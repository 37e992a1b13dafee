// What every csrc/ops source includes first: the ATen headers, the largest
// part of each object's compile time. A GCC build compiles them once, with
// the objects' own flags, into a precompiled header that GCC reads in place
// of this file (setup.py, precompiled_header; docs/environment.md); any other
// build parses them here as usual. Sources still include what they use.
// (An include guard: GCC warns of #pragma once in a header it compiles.)
#ifndef BWDCONV_OPS_PRECOMPILED_H
#define BWDCONV_OPS_PRECOMPILED_H

#include <ATen/ATen.h>

#endif
