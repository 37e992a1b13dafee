// scatter.cu compiled for the host target (portability.h).
#define BWDCONV_HOST_TARGET 1
#if defined(__GNUC__) && !defined(__clang__)
// coords[] is filled for every dim a view has; GCC cannot see that dims >= 2.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include "hip/scatter.cu"
