"""The interleave and scatter kernels' launch parameters and index math on
any machine: with BWDCONV_CPU_KERNEL_TWINS=1 (read once, so in a subprocess)
the CPU writes dx (phase, phase_stacked, swap1x1) and scatter's buffer
through the kernels' CPU twins, and every dx must equal, bit for bit and
stride for stride, the one the CPU's strided ATen copies produce."""

import os
import pathlib
import random
import subprocess
import sys

import torch

import bwdconv
from test_strategies import operands, random_case

TESTS = pathlib.Path(__file__).resolve().parent
SEED = 20261123
TRIALS = 120
# 1x1 shapes whose channels_last dx swap1x1's in_place writer can fill (no
# padding, one group, slots forming one strided batch), rare among random ones.
IN_PLACE_CASES = [((2, 8, 10, 12), (8, 8, 1, 1), [2, 2], [0, 0], [1, 1], 1),
                  ((1, 4, 9, 11), (6, 4, 1, 1), [2, 3], [0, 0], [1, 1], 1),
                  ((2, 4, 3, 5, 8), (4, 4, 1, 1, 1), [1, 1, 2], [0, 0, 0], [1, 1, 1], 1)]


def kernel_written_gradients(seed):
    """[(description, dx)] for random 1-3D shapes in float64, float32 and
    bfloat16, NCHW and channels_last, each strategy whose data movement is a
    kernel on GPUs: the interleave pass (phase, phase_stacked, swap1x1 with
    both writers) and scatter's buffer."""
    rng = random.Random(seed)
    results = []
    for trial in range(TRIALS + len(IN_PLACE_CASES)):
        one_by_one = trial % 3 == 0 or trial >= TRIALS
        if trial < TRIALS:
            case = random_case(rng, one_by_one=one_by_one)
        else:
            case = IN_PLACE_CASES[trial - TRIALS]
        dtype = (torch.float64, torch.float32, torch.bfloat16)[trial % 3]
        x, w = operands(case, dtype=dtype, seed=trial)
        _, _, s, p, d, groups = case
        torch.manual_seed(trial)
        dy = torch.randn_like(torch.ops.aten.convolution(x, w, None, s, p, d, False,
                                                         [0] * len(s), groups))
        if (trial % 2 or trial >= TRIALS) and dy.dim() > 3:
            dy = dy.contiguous(memory_format=torch.channels_last if dy.dim() == 4
                               else torch.channels_last_3d)
        # Every strategy that launches the interleave or scatter kernel on a GPU;
        # swap1x1 once per writer.
        forcings = [(e.name, None) for e in bwdconv.registry()
                    if e.kernel in ("interleave", "scatter") and e.name != "swap1x1"]
        if one_by_one:
            forcings += [("swap1x1", "fused"), ("swap1x1", "in_place")]
        for strategy, writer in forcings:
            try:
                with bwdconv.force_strategy(strategy, swap1x1_writer=writer, strict=True):
                    gx = torch.ops.bwdconv.convolution_backward_input(dy, w, list(x.shape), s, p,
                                                                      d, groups)
            except ValueError:
                continue  # the strategy (or writer) cannot serve this shape
            results.append((f"trial {trial} {strategy} {writer} {case} {dtype}", gx))
    return results


def test_kernel_twin_writes_what_the_aten_writer_writes(tmp_path):
    path = tmp_path / "twins.pt"
    code = ("import sys, torch; sys.path.insert(0, %r); import bwdconv; "
            "assert bwdconv._library._C.kernel_twins_on_cpu(); "
            "from test_kernel_twins import kernel_written_gradients; "
            "torch.save(kernel_written_gradients(%d), %r)" % (str(TESTS), SEED, str(path)))
    env = dict(os.environ, BWDCONV_CPU_KERNEL_TWINS="1")
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    twins = torch.load(path)
    assert not bwdconv._library._C.kernel_twins_on_cpu()
    ours = kernel_written_gradients(SEED)
    assert [where for where, _ in twins] == [where for where, _ in ours]
    assert len(ours) >= 300
    assert sum(" scatter " in where for where, _ in ours) >= 100
    assert sum("in_place" in where for where, _ in ours) >= len(IN_PLACE_CASES)
    for (where, twin), (_, aten_written) in zip(twins, ours):
        assert twin.stride() == aten_written.stride(), where
        assert torch.equal(twin, aten_written), where
