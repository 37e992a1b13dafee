"""Where CPU tensors' data movement runs: ATen (the default), or the
csrc/hip kernels themselves on the host grid (the GPU kernels' code, run on
the CPU: slower, for the tests, which also record the kernels' memory
accesses)."""

import contextlib

from . import _settings
from ._library import _C


def kernels_on_host_enabled():
    """Whether CPU tensors run the csrc/hip kernels on the host grid."""
    return _C.kernels_on_host()


@contextlib.contextmanager
def kernels_on_host():
    """Inside the block, CPU tensors run bwdconv's own kernels (scatter, the
    interleave pass of phase, phase_stacked and swap1x1, relayout's
    transposes) on the host grid instead of ATen."""
    previous = _C.kernels_on_host()
    _C.set_kernels_on_host(True)
    try:
        yield
    finally:
        _C.set_kernels_on_host(previous)


def _apply_environment():
    """BWDCONV_CPU_KERNELS=host runs the kernels on the host grid for the whole process."""
    value = _settings.from_environment("BWDCONV_CPU_KERNELS", _settings.choice_of("aten", "host"),
                                       "aten")
    _C.set_kernels_on_host(value == "host")
