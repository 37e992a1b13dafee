// The functional scope's per-call decision (docs/DESIGN.md, "Pass-through"):
// whether a torch.nn.functional convolution call goes straight to the
// function bwdconv replaced, decided in C++ from the Python arguments as the
// caller gave them, so that a call planned for aten costs one plan lookup.
#pragma once

#include <Python.h>

namespace bwdconv::ops {

// Python functions for bwdconv._C, null-terminated (PyModule_AddFunctions):
//
// functional_passes_through(spatial_dims, args, kwargs) -> bool:
// True when the call goes to the original function, because bwdconv does
// not plan it (its operands, dtype, device, autograd or tracing state) or
// because its backward is planned for aten for every gradient it needs.
// False: bwdconv's Python wrapper takes the call (it may still find it
// invalid and hand it to the original to raise).
//
// transposed_passes_through(spatial_dims, args, kwargs) -> bool: the same for
// conv_transpose{spatial_dims}d, whose forward bwdconv plans too, with or
// without a gradient.
//
// functional_call(spatial_dims, args, kwargs) and transposed_call(...): the
// call routed and, when bwdconv's op takes it, made: None when it goes to the
// original function (not planned, planned for aten, or invalid: the original
// raises PyTorch's error); NotImplemented when bwdconv's Python wrapper takes
// it (arguments only the wrapper normalises, a torch function mode); else
// the op's result, so that a planned call costs no Python beyond this one.
extern PyMethodDef functional_route_methods[];

}  // namespace bwdconv::ops
