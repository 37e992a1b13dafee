// The functional scope's per-call decision (docs/DESIGN.md, "Pass-through"):
// whether a torch.nn.functional convolution call goes straight to the
// function bwdconv replaced, decided in C++ from the Python arguments as the
// caller gave them, so that a call planned for aten costs one plan lookup.
#pragma once

#include <Python.h>

namespace bwdconv::ops {

// Python functions for bwdconv._C, null-terminated (PyModule_AddFunctions):
//
// functional_call(spatial_dims, args, kwargs) and transposed_call(...), for
// conv{spatial_dims}d and conv_transpose{spatial_dims}d: the call routed and,
// when bwdconv's op takes it, made. None when it goes to the original
// function: bwdconv does not plan it (its operands, dtype, device, autograd
// or tracing state), every gradient it needs (and a transposed forward) is
// planned for aten, or it is invalid (the original raises PyTorch's error).
// NotImplemented when bwdconv's Python wrapper takes it (arguments only the
// wrapper normalises, a torch function mode). Else the op's result, so that
// a planned call costs no Python beyond this one.
extern PyMethodDef functional_route_methods[];

}  // namespace bwdconv::ops
