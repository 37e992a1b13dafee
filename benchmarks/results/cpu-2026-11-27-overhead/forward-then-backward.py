"""conv_transpose2d k2 s2 float32 (8x64x28x28): aten's forward and
phase_stacked's, each followed by aten's backward of the convolution, the
two alternating in one process (300 rounds, the first 20 untimed). Prints
the median forward and backward of each.

    python forward-then-backward.py     # twice: forward-then-backward.txt
"""
import statistics
import time

import torch

from bwdconv import _C
from bwdconv.bench import device

device.fix_heap_thresholds()
torch.set_num_threads(2)
x, w = torch.randn(8, 64, 28, 28), torch.randn(64, 32, 2, 2)
grad = torch.ones(()).expand(8, 32, 56, 56)  # out.sum()'s gradient
args = ([2, 2], [0, 0], [1, 1])
forwards = {
    "aten": lambda: torch.ops.aten.convolution(x, w, None, *args, True, [0, 0], 1),
    "phase_stacked": lambda: _C.gradient_with("input", "phase_stacked", None, x, w,
                                               [8, 32, 56, 56], *args, 1),
}
times = {name: {"forward": [], "backward": []} for name in forwards}
for index in range(300):
    for name in list(forwards)[::1 if index % 2 else -1]:
        started = time.perf_counter()
        forwards[name]()
        middle = time.perf_counter()
        torch.ops.aten.convolution_backward(grad, x, w, None, *args, True, [0, 0], 1,
                                            [True, True, False])
        ended = time.perf_counter()
        if index >= 20:
            times[name]["forward"].append(middle - started)
            times[name]["backward"].append(ended - middle)
for name, phases in times.items():
    print(f"{name:14s} " + "  ".join(f"{phase} {statistics.median(t) * 1e6:7.1f} us"
                                     for phase, t in phases.items()))
