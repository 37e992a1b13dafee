"""The step benchmarks: per-call overhead, training-step ratios and their intervals,
the models, weight transforms and random steps."""

import contextlib
import json
import os
import pathlib
import random
import sys

import pytest
import torch

import bwdconv

from bwdconv.bench import random_steps

def test_overhead_benchmark_reports_every_kind_pass_and_scope(tmp_path, capsys):
    from bwdconv.bench import overhead

    out = tmp_path / "overhead.json"
    assert overhead.main(["--samples", "3", "--calls", "2", "--no-models", "--device", "cpu",
                          "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["tiny"]
    assert {(r["kind"], r["planned"].split()[0], r["pass"]) for r in rows} == {
        (k, p, s) for k in ("conv", "transposed") for p in ("aten", "strategy")
        for s in ("forward", "forward+backward")}
    for r in rows:
        assert r["without_us"] > 0
        for scope in ("functional", "aten"):
            assert r[scope]["p25_us"] <= r[scope]["median_us"] <= r[scope]["p75_us"]
    assert {"aten (new shape each call)", "aten (200 distinct calls)"} <= \
        {r["planned"] for r in rows}
    assert "transposed" in capsys.readouterr().out


def test_overhead_benchmark_times_only_the_held_out_shapes_named(tmp_path, monkeypatch,
                                                                 fresh_tuning):
    from bwdconv.bench import overhead

    tiny = [("conv2d tiny", (1, 2, 6, 6), (3, 2, 3, 3), 2, 1, torch.float32, False),
            ("conv1d tiny", (1, 2, 8), (3, 2, 3), 2, 1, torch.float32, False)]
    monkeypatch.setattr(overhead, "HELD_OUT", tiny)
    out = tmp_path / "overhead.json"
    assert overhead.main(["--tuned", "--held-out", "conv1d tiny", "--steps", "1", "--device",
                          "cpu", "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    assert [row["shape"] for row in result["tuned"]] == ["conv1d tiny"]
    assert "tiny" not in result and "training" not in result


def test_the_ratio_interval_holds_the_true_ratio_and_narrows_with_rounds():
    """The steps' bootstrap interval: exact where the ratio is exact, around
    the ratio the times were drawn with, and narrower with more rounds."""
    import random

    from bwdconv.bench import ratios

    base = [10.0 + i % 7 for i in range(50)]
    assert ratios.ratio_interval(base, base) == (1.0, 1.0)
    low, high = ratios.ratio_interval(base, [t * 1.25 for t in base])
    assert low == pytest.approx(0.8) and high == pytest.approx(0.8)

    draw = random.Random(5)

    def widths(rounds):
        without = [draw.gauss(20.0, 1.0) for _ in range(rounds)]
        timed = [draw.gauss(20.0, 1.0) * 1.05 for _ in range(rounds)]
        low, high = ratios.ratio_interval(without, timed)
        assert low < 1 / 1.05 < high
        return high - low
    assert widths(800) < widths(50) / 2


@pytest.mark.parametrize("kind", ["conv", "transposed"])
def test_overhead_cases_call_what_each_mode_enabled(kind):
    """The benchmark's calls reach torch.nn.functional as enable() left it:
    bwdconv serves them in the functional scope, nothing does without it."""
    from bwdconv.bench import overhead

    _, forward_backward, forced = overhead.tiny_case(kind, "strategy", torch.device("cpu"))
    held_out = overhead._held_out_step(
        next(c for c in overhead.HELD_OUT if c[0].startswith(overhead.KINDS[kind])),
        torch.device("cpu"))
    for fn in (forward_backward, held_out):
        for name, served in (("without", 0), ("functional", 1)):
            bwdconv.reset_served()
            with bwdconv.force_strategy(forced), overhead.mode(name):
                fn()
            counted = "forward" if kind == "transposed" else "input"
            assert sum(bwdconv.served()[counted].values()) == served, (fn, name)


def test_the_null_comparison_switches_as_a_mode_does_and_runs_without_bwdconv(monkeypatch):
    from bwdconv.bench import overhead

    entered = []
    real_enabled = bwdconv.enabled

    @contextlib.contextmanager
    def recording(scope="functional"):
        entered.append(scope)
        with real_enabled(scope):
            yield

    monkeypatch.setattr(bwdconv, "enabled", recording)
    original = torch.nn.functional.conv2d
    with overhead.mode(overhead.NULL):
        assert torch.nn.functional.conv2d is original
        assert not bwdconv.is_enabled()
    assert entered == ["functional"]
    with overhead.mode("without"):
        pass
    assert entered == ["functional"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_fixed_heap_thresholds_keep_blocks_of_megabytes_on_the_heap():
    # In a fresh process of its own (the thresholds stay fixed for its
    # lifetime): glibc maps a first 16 MiB block apart from the heap by
    # default, and places it in the heap once the thresholds are fixed.
    import subprocess

    script = """
import sys, torch
from bwdconv.bench import device


fixed = device.fix_heap_thresholds() if sys.argv[1] == "fixed" else False
block = torch.empty(4 << 20)  # 16 MiB of float32
address = block.data_ptr()
with open("/proc/self/maps") as maps:
    heaps = [line.split()[0].split("-") for line in maps if line.rstrip().endswith("[heap]")]
print(fixed, any(int(low, 16) <= address < int(high, 16) for low, high in heaps))
"""
    outputs = {mode: subprocess.run([sys.executable, "-c", script, mode], capture_output=True,
                                    text=True, check=True).stdout.split()
               for mode in ("fixed", "default")}
    assert outputs == {"fixed": ["True", "True"], "default": ["False", "False"]}


def test_the_paired_ratio_cancels_a_drift_the_ratio_of_medians_does_not():
    """Rounds whose speed drifts by a third over the run, the mode 2% slower
    in each: the paired interval holds 1/1.02 tightly; the ratio of medians
    is no more precise than the drift allows."""
    import random

    from bwdconv.bench import ratios

    draw = random.Random(7)
    drift = [1 + i / 300 for i in range(100)]
    without = [20.0 * d * draw.gauss(1, 0.003) for d in drift]
    timed = [20.0 * d * 1.02 * draw.gauss(1, 0.003) for d in drift]
    round_ratios = [a / b for a, b in zip(without, timed)]
    low, high = ratios.median_interval(round_ratios)
    assert low < 1 / 1.02 < high and high - low < 0.002
    paired_width = high - low
    low, high = ratios.ratio_interval(without, timed)
    assert high - low > 3 * paired_width


def test_the_models_bench_tunes_in_a_cache_of_its_own(monkeypatch):
    """bench.models' tuned side runs with a temporary decisions cache, removed
    afterwards, unless --tuning-cache names one; the header says which."""
    from bwdconv.bench import models

    users = os.environ["BWDCONV_CACHE_DIR"]
    seen = []
    monkeypatch.setattr(models, "_run", lambda args, decisions: seen.append(
        (os.environ["BWDCONV_CACHE_DIR"], decisions)) or 0)
    assert models.main(["--models", "unet"]) == 0
    directory, words = seen.pop()
    assert directory != users and not pathlib.Path(directory).exists()  # removed after
    assert words == "the bench's own, in a temporary directory removed after the run"
    assert os.environ["BWDCONV_CACHE_DIR"] == users
    assert models.main(["--models", "unet", "--tuning-cache", "user"]) == 0
    assert seen.pop() == (users, f"the user's, {users}/decisions-v1.json (--tuning-cache user)")


def test_rounds_draw_their_order_and_warm_each_entry_first():
    """bench.device.time_in_rounds: every round calls each entry its count
    plus one untimed call, inside its context, and the order changes between
    rounds (a fixed order kept each entry after the same neighbour)."""
    import contextlib

    from bwdconv.bench import device as dev

    calls, contexts = [], []

    def entry(name):
        @contextlib.contextmanager
        def context():
            contexts.append(name)
            yield
        return (lambda: calls.append(name)), context

    names = ["a", "b", "c", "d"]
    times = dev.time_in_rounds({n: entry(n) for n in names}, torch.device("cpu"), [2, 3, 2, 3, 2])
    assert {n: len(t) for n, t in times.items()} == {n: 12 for n in names}
    assert len(calls) == 4 * (12 + 5) and contexts.count("a") == 5
    rounds = [contexts[i:i + 4] for i in range(0, 20, 4)]
    assert all(sorted(r) == names for r in rounds) and len({tuple(r) for r in rounds}) > 1
    first = calls[:3]  # round 0's first entry: one untimed call, then its two timed
    assert first == [rounds[0][0]] * 3


def test_transforms_bench_times_every_serving_strategy_three_ways(tmp_path):
    """bench.transforms: each layer's serving strategies, with aten's time, the
    filter built each call and reused; small, so only its shape is checked."""
    from bwdconv.bench import transforms

    out = tmp_path / "transforms.json"
    assert transforms.main(["--rounds", "2", "--calls", "1", "--scale", "16",
                            "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert {r["layer"] for r in rows} == {layer[0] for layer in transforms.LAYERS}
    for r in rows:
        assert set(r["median_ms"]) == set(transforms.SIDES)
        assert all(t > 0 for t in r["median_ms"].values())
    assert len(rows) >= 2 * 3  # scatter, phase and phase_stacked at least, per layer


@pytest.mark.parametrize("name", [name for name, (_, expected) in random_steps.CLASSES.items()
                                  if expected])
def test_random_step_classes_mostly_draw_shapes_the_cpu_rules_plan_their_strategy(name):
    """bench.random_steps: a class's raw draws (before it redraws the ones the
    rules plan otherwise) must mostly be shapes the rules give the class's
    strategy, or the class no longer follows the rules it is named after."""
    make, (gradient, strategy) = random_steps.CLASSES[name]
    draw, hits, valid = random.Random(3), 0, 0
    while valid < 40:
        case = {"channels_last": False, "transposed": False, "groups": 1, **make(draw)}
        case.setdefault("p", [0] * case["dims"])
        case.setdefault("d", [1] * case["dims"])
        if min(random_steps.geometry(case).output_spatial()) < 1:
            continue
        valid += 1
        flops = random_steps._flops(case)
        in_range = case.get("min_flops", 1 << 18) <= flops <= case.get("max_flops", 1 << 29)
        hits += in_range and random_steps.planned(case, torch.device("cpu"))[gradient] == strategy
    assert hits >= valid // 2, f"{hits} of {valid}"


def test_random_steps_time_each_case_in_every_mode_and_name_what_served(tmp_path, capsys):
    out = tmp_path / "steps.json"
    assert random_steps.main(["--cases", "2", "--classes", "swap1x1", "--rounds", "6",
                              "--max-flops", str(2 ** 20), "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert len(rows) == 2
    for row in rows:
        assert row["served"]["input"] == ["swap1x1"] and row["served"]["weight"] == ["aten"]
        assert 2 ** 18 <= row["flops"] <= 2 ** 20
        for mode in ("functional", "aten", "null"):
            assert row[mode]["ratio"] > 0 and row[mode]["ms"] > 0
    printed = capsys.readouterr().out
    assert "functional: ratios" in printed and "with the whole 90% interval below 1" in printed
    with pytest.raises(ValueError, match="no shape of class strided"):
        random_steps.draw_case(random.Random(0), "strided", 1, torch.device("cpu"))
