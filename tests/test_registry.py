"""The strategy registry (csrc/dispatch/strategies.h) is the one list of
strategies: every consumer follows it, and no other list exists."""

import ast
import pathlib
import re

import pytest
import torch

import bwdconv
from bwdconv.bench import kernels as bench_kernels
from bwdconv.bench import run as bench_run
from conftest import aten_gradients

ROOT = pathlib.Path(__file__).resolve().parents[1]
ENTRIES = bwdconv.registry()
NAMES = [e.name for e in ENTRIES]
GRADIENTS = ("input", "weight")

# (input size, weight size, stride, padding, dilation, groups): between them,
# every strategy serves every gradient it computes on one of these.
CASES = [
    ((2, 4, 9, 9), (6, 4, 3, 3), [2, 2], [1, 1], [1, 1], 1),
    ((2, 4, 8, 8), (6, 4, 1, 1), [2, 2], [0, 0], [1, 1], 1),
]


def test_the_registry_lists_each_strategy_once_with_what_it_computes():
    assert len(set(NAMES)) == len(NAMES) and NAMES[0] == "aten"
    for e in ENTRIES:
        assert e.gradients and set(e.gradients) <= set(GRADIENTS), e
        assert set(e.deterministic) == {"cpu", "gpu"}, e
    assert bwdconv.strategies() == NAMES
    for gradient in GRADIENTS:
        assert bwdconv.strategies(gradient) == [e.name for e in ENTRIES if gradient in e.gradients]
    with pytest.raises(ValueError, match="expected gradient"):
        bwdconv.strategies("bias")


def first_served(name, gradient):
    for case in CASES:
        if bwdconv.explain(*case).serves(name, gradient):
            return case
    raise AssertionError(f"no case for {name} ({gradient})")


def backward(gradient, case, x, w, dy):
    _, _, s, p, d, groups = case
    if gradient == "input":
        return torch.ops.bwdconv.convolution_backward_input(dy, w, list(x.shape), s, p, d, groups)
    return torch.ops.bwdconv.convolution_backward_weight(dy, x, list(w.shape), s, p, d, groups)


def operands(case, dtype=torch.float64):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(case[0], generator=g, dtype=dtype)
    w = torch.randn(case[1], generator=g, dtype=dtype)
    _, _, s, p, d, groups = case
    dy = torch.randn(torch.ops.bwdconv.convolution(x, w, None, s, p, d, groups).shape,
                     generator=g, dtype=dtype)
    return x, w, dy


@pytest.mark.parametrize("entry", ENTRIES, ids=NAMES)
def test_every_consumer_follows_the_registry(entry):
    """One strategy, walked through everything that lists strategies."""
    name = entry.name
    # The planner and explain: a candidate for both gradients, refused for
    # the one it does not compute.
    plan = bwdconv.explain(*CASES[0]).to_dict()
    for gradient in GRADIENTS:
        assert [c["strategy"] for c in plan[gradient]["candidates"]] == NAMES
        if gradient not in entry.gradients:
            assert not bwdconv.explain(*CASES[0]).serves(name, gradient)
            assert any(c["strategy"] == name and "gradient only" in c["reason"]
                       for c in plan[gradient]["candidates"])
    # The implementations (csrc/ops/strategies.cpp): forced, it computes each
    # of its gradients, is counted, and agrees with aten in float64.
    for gradient in entry.gradients:
        case = first_served(name, gradient)
        x, w, dy = operands(case)
        bwdconv.reset_served()
        with bwdconv.force_strategy(name):
            ours = backward(gradient, case, x, w, dy)
        assert bwdconv.served()[gradient][name] == 1
        expected = aten_gradients(dy, x, w, *case[2:])[GRADIENTS.index(gradient)]
        torch.testing.assert_close(ours, expected, rtol=1e-10, atol=1e-10)
    # The bench times it forced for each gradient it computes (aten is the baseline).
    for gradient in GRADIENTS:
        assert (name in bench_run.forced_strategies(gradient)) == \
            (gradient in entry.gradients and name != "aten")
    if "input" in entry.gradients and entry.kernel:
        assert bench_kernels.kernels()[name] == entry.kernel
        assert (ROOT / "csrc" / "hip" / f"{entry.kernel}.cu").exists()
    # The tests iterate it.
    import test_gpu
    import test_strategies
    assert name in test_strategies.ALL_STRATEGIES and name in test_gpu.STRATEGIES
    # Its files, and the docs.
    assert (ROOT / "csrc" / "ops" / f"{name}.cpp").exists()
    if name != "aten":
        assert (ROOT / "csrc" / "dispatch" / f"{name}.h").exists()
    design = (ROOT / "docs" / "DESIGN.md").read_text()
    assert re.search(rf"^### {name}\b", design, re.M), f"docs/DESIGN.md has no section on {name}"
    table = (ROOT / "docs" / "strategies.md").read_text()
    assert re.search(rf"^\| `{name}` \|", table, re.M), f"docs/strategies.md's table lacks {name}"


@pytest.mark.parametrize("entry", [e for e in ENTRIES if e.deterministic["cpu"]],
                         ids=lambda e: e.name)
def test_what_the_registry_calls_deterministic_on_the_cpu_is(entry):
    """The same bits on every call, on a problem big enough to use every thread."""
    case = ((4, 16, 24, 24), (32, 16, 3, 3), [2, 2], [1, 1], [1, 1], 1)
    if "swap1x1" == entry.name:
        case = ((4, 16, 24, 24), (32, 16, 1, 1), [2, 2], [0, 0], [1, 1], 1)
    x, w, dy = operands(case, dtype=torch.float32)
    for gradient in entry.gradients:
        with bwdconv.force_strategy(entry.name):
            runs = [backward(gradient, case, x, w, dy) for _ in range(3)]
        assert all(torch.equal(r, runs[0]) for r in runs), (entry.name, gradient)


def is_name_list(text, names):
    """"a, b" or "a b": two or more strategy names and nothing else."""
    words = re.findall(r"\w+", text)
    return len(set(words)) >= 2 and set(words) <= names and re.fullmatch(r"[\w,\s]+", text)


def strategy_lists(tree, names):
    """Literal lists, tuples and sets holding two or more strategy names
    (directly, or as the first item of their tuples), and strings that are
    nothing but strategy names, with line numbers. Dicts keyed by strategy
    (timings, counts) are data about those strategies, not lists of them."""
    def name_of(node):
        if isinstance(node, ast.Tuple) and node.elts:
            node = node.elts[0]
        if isinstance(node, ast.Constant) and node.value in names:
            return node.value
        return None

    for node in ast.walk(tree):
        items = node.elts if isinstance(node, (ast.List, ast.Tuple, ast.Set)) else []
        found = {name_of(item) for item in items if item is not None} - {None}
        if len(found) >= 2:
            yield node.lineno, sorted(found)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                is_name_list(node.value, names):
            yield node.lineno, node.value


def test_no_strategy_list_exists_outside_the_registry():
    names = set(NAMES)
    found = []
    for folder in ("python", "tests", "scripts", "benchmarks"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(), filename=str(path))
            found += [f"{path.relative_to(ROOT)}:{line}: {items}"
                      for line, items in strategy_lists(tree, names)]
    literal = re.compile(r'"([^"\n]*)"')
    for path in sorted((ROOT / "tests" / "cpp").glob("*.cpp")) + \
            sorted((ROOT / "scripts").glob("*.sh")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            for text in literal.findall(line):
                if is_name_list(text, names):
                    found.append(f"{path.relative_to(ROOT)}:{number}: {text}")
    assert not found, "strategy lists outside csrc/dispatch/strategies.h:\n" + "\n".join(found)


def test_the_list_finder_finds_lists():
    names = set(NAMES)
    source = f"A = {NAMES[:2]!r}\nB = {{{NAMES[1]!r}, {NAMES[2]!r}}}\n" \
             f"C = [({NAMES[1]!r}, None), ({NAMES[2]!r}, None)]\nD = {', '.join(NAMES)!r}\n"
    assert [line for line, _ in strategy_lists(ast.parse(source), names)] == [1, 2, 3, 4]
    timings = f"T = {{{NAMES[0]!r}: 2.0, {NAMES[1]!r}: 1.0}}"
    assert not list(strategy_lists(ast.parse(timings), names))
    assert not list(strategy_lists(ast.parse(f"E = [{NAMES[1]!r}, 'fused']"), names))
    prose = f"F = 'the {NAMES[1]} and {NAMES[2]} strategies'"
    assert not list(strategy_lists(ast.parse(prose), names))
