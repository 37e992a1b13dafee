"""bwdconv.reuse_weight_transforms: the filters a strategy derives from a
weight are built once per weight version inside the block, and every result
is what aten computes (docs/DESIGN.md, "Weight transforms")."""

import gc

import pytest
import torch
import torch.nn.functional as F

import bwdconv

# (weight size, stride, padding, input size) of transposed convolutions: a
# 3x3 filter (every strategy but swap1x1) and kernel = stride (swap1x1's).
SHAPES = [((6, 4, 3, 3), 2, 1, (2, 6, 7, 5)), ((6, 4, 2, 2), 2, 0, (2, 6, 7, 5))]


def case_for(strategy):
    """(strategy, weight size, stride, padding, input size): the first shape
    whose transposed forward `strategy` serves."""
    for w_size, stride, padding, x_size in SHAPES:
        plan = bwdconv.explain(list(x_size), list(w_size), [stride] * 2, [padding] * 2, [1, 1], 1,
                               transposed=True)
        if plan.serves(strategy, "input"):
            return strategy, w_size, stride, padding, x_size
    raise AssertionError(f"no shape here that {strategy} serves")


CASES = [case_for(s) for s in bwdconv.strategies("input") if s != "aten"]


def counts():
    return bwdconv.weight_cache_counts()


def transposed(x, w, stride, padding, strategy):
    with bwdconv.enabled(), bwdconv.force_strategy(strategy, strict=True):
        return F.conv_transpose2d(x, w, stride=stride, padding=padding)


def assert_matches_float64(result, x, w, stride, padding):
    expected = F.conv_transpose2d(x.double(), w.double(), stride=stride, padding=padding)
    torch.testing.assert_close(result.double(), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("strategy, w_size, stride, padding, x_size", CASES)
def test_a_weight_is_transformed_once_per_version(strategy, w_size, stride, padding, x_size):
    torch.manual_seed(0)
    x, w = torch.randn(x_size), torch.randn(w_size)
    outside = transposed(x, w, stride, padding, strategy)
    before = counts()
    with bwdconv.reuse_weight_transforms():
        first = transposed(x, w, stride, padding, strategy)
        built = counts()
        again = [transposed(x, w, stride, padding, strategy) for _ in range(3)]
        reused = counts()
        with torch.no_grad():
            w.mul_(-0.5)  # a new version: the next call builds again
        changed = transposed(x, w, stride, padding, strategy)
        rebuilt = counts()
        kept = counts()["entries"]
    assert built["builds"] > before["builds"] and built["entries"] > 0
    assert reused["hits"] - built["hits"] == 3 * (built["builds"] - before["builds"])
    assert reused["builds"] == built["builds"]
    assert rebuilt["builds"] > reused["builds"]
    assert kept >= 1 and counts()["entries"] == 0  # leaving the block frees them
    for result in [first, *again]:
        assert torch.equal(result, outside)
    assert_matches_float64(changed, x, w, stride, padding)


def test_outside_the_block_nothing_is_kept():
    strategy, w_size, stride, padding, x_size = case_for("scatter")
    x, w = torch.randn(x_size), torch.randn(w_size)
    before = counts()
    transposed(x, w, stride, padding, strategy)
    transposed(x, w, stride, padding, strategy)
    assert counts() == before


def test_blocks_nest_and_the_outermost_frees():
    strategy, w_size, stride, padding, x_size = case_for("phase")
    x, w = torch.randn(x_size), torch.randn(w_size)
    with bwdconv.reuse_weight_transforms():
        with bwdconv.reuse_weight_transforms():
            transposed(x, w, stride, padding, strategy)
        assert counts()["entries"] > 0
        hits = counts()["hits"]
        transposed(x, w, stride, padding, strategy)
        assert counts()["hits"] > hits
    assert counts()["entries"] == 0


def test_a_weight_that_is_gone_leaves_the_cache():
    strategy, w_size, stride, padding, x_size = case_for("scatter")
    x = torch.randn(x_size)
    with bwdconv.reuse_weight_transforms():
        w = torch.randn(w_size)
        transposed(x, w, stride, padding, strategy)
        assert counts()["entries"] == 1
        del w
        gc.collect()
        other = torch.randn(w_size)  # the next build drops the dead weight's entry
        transposed(x, other, stride, padding, strategy)
        assert counts()["entries"] == 1


def test_inference_tensors_and_views_of_the_weight_are_not_kept():
    with bwdconv.reuse_weight_transforms():
        with torch.inference_mode():
            w = torch.randn(6, 4, 3, 3)
            x = torch.randn(2, 6, 7, 5)
            before = counts()
            result = transposed(x, w, 2, 1, "scatter")
            assert counts() == before  # no version to check: built every call
        assert_matches_float64(result, x, w, 2, 1)
        # swap1x1 on a 1x1 filter reads the weight as a matrix, a view of it
        x, w = torch.randn(2, 6, 7, 5), torch.randn(6, 4, 1, 1)
        before = counts()
        transposed(x, w, 2, 0, "swap1x1")
        assert counts()["entries"] == before["entries"]


def test_training_steps_inside_the_block_follow_the_weights():
    torch.manual_seed(1)
    layer = torch.nn.ConvTranspose2d(6, 4, 3, stride=2, padding=1)
    reference = torch.nn.ConvTranspose2d(6, 4, 3, stride=2, padding=1).double()
    reference.load_state_dict(layer.state_dict())
    opt = torch.optim.SGD(layer.parameters(), lr=0.1)
    opt_ref = torch.optim.SGD(reference.parameters(), lr=0.1)
    with bwdconv.reuse_weight_transforms(), bwdconv.enabled(), \
            bwdconv.force_strategy("phase", strict=True):
        for step in range(3):
            x = torch.randn(2, 6, 7, 5)
            for model, optimizer, inp in ((layer, opt, x), (reference, opt_ref, x.double())):
                optimizer.zero_grad()
                model(inp).square().sum().backward()
                optimizer.step()
            torch.testing.assert_close(layer.weight.double(), reference.weight, rtol=1e-4,
                                       atol=1e-4)
        assert counts()["builds"] > 0
