// relayout.cu compiled for the host target (portability.h).
#define BWDCONV_HOST_TARGET 1
#include "hip/relayout.cu"
