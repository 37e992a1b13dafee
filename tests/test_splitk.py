"""splitk's weight gradient (docs/DESIGN.md, "splitk"): on random 1-3D shapes
with groups, dilation and padding, in every dtype, NCHW and channels_last, it
meets the accuracy rule against aten and gives the same bits on every run."""

import random

import pytest
import torch

import bwdconv
from conftest import aten_gradients
from test_host_kernels import DTYPES, SEED, assert_accurate, case_operands
from test_strategies import random_case


def weight_gradient(case, dy, x, w):
    _, _, s, p, d, groups = case
    with bwdconv.force_strategy("splitk", strict=True):
        return torch.ops.bwdconv.convolution_backward_weight(dy, x, list(w.shape), s, p, d,
                                                             groups)


def splitk_cases():
    rng = random.Random(SEED + 1)
    cases = [random_case(rng, within_stride=trial % 5 == 0) for trial in range(40)]
    # stride 1 in the first dim, groups, dilation, padding, a 1x1, and a
    # reduction long enough for several chunks of batch rows and of rows
    cases += [((2, 4, 12, 12), (6, 2, 3, 3), [1, 1], [1, 1], [1, 1], 2),
              ((2, 4, 12, 11), (6, 2, 3, 3), [1, 2], [1, 1], [1, 1], 2),
              ((1, 3, 9, 8, 7), (4, 3, 3, 2, 2), [1, 1, 2], [2, 0, 1], [2, 1, 1], 1),
              ((3, 2, 30), (4, 1, 5), [1], [2], [3], 2),
              ((2, 8, 6, 6), (8, 8, 1, 1), [1, 1], [0, 0], [1, 1], 1),
              ((3, 2, 300, 300), (3, 2, 3, 3), [1, 1], [1, 1], [1, 1], 1)]
    return [(trial, case, DTYPES[trial % 4], trial % 2 == 1) for trial, case in enumerate(cases)]


@pytest.mark.parametrize("trial,case,dtype,last", splitk_cases())
def test_splitk_meets_the_accuracy_rule_and_repeats_bit_for_bit(trial, case, dtype, last):
    (x, w, dy), (x64, w64, dy64) = case_operands(case, trial, dtype, last)
    _, _, s, p, d, groups = case
    reference = aten_gradients(dy64, x64, w64, s, p, d, groups)[1]
    theirs = aten_gradients(dy, x, w, s, p, d, groups)[1]
    ours = weight_gradient(case, dy, x, w)
    again = weight_gradient(case, dy, x, w)
    where = f"trial {trial} {case} {dtype} channels_last={last}"
    assert ours.dtype == dtype and ours.shape == w.shape, where
    assert torch.equal(ours, again), where
    assert_accurate(ours, theirs, reference, where)


def test_the_long_case_takes_several_chunks_of_both_kinds():
    """The last case above: 3 x 300 x 300 = 270000 steps, floor(270000 /
    65536) = 4 wanted: 3 batch ranges, each cut into 2 row ranges."""
    _, _, s, p, d, groups = case = splitk_cases()[-1][1]
    plan = bwdconv.explain(list(case[0]), list(case[1]), s, p, d, groups).to_dict()["splitk"]
    assert (plan["batch_chunks"], plan["space_chunks"]) == (3, 2)
