"""Autotuning: measured decisions verified against aten, the noise rule, the
persistent cache (processes, concurrent writers, corrupt files, read-only
directories, foreign keys), and where it must not tune. An injected timer
makes the outcome deterministic where the test needs it."""

import json
import os
import subprocess
import sys
import textwrap
import warnings

import pytest
import torch

import bwdconv
from bwdconv import _cache, _memory, _tune
from bwdconv._library import _C
from conftest import aten_gradients

# A 3x3 stride-2 shape every input strategy serves, and a 1x1 stride-2 one.
STRIDED = ((2, 4, 9, 9), (6, 4, 3, 3), [2, 2], [1, 1], [1, 1], 1)
ONE_BY_ONE = ((2, 8, 8, 8), (8, 8, 1, 1), [2, 2], [0, 0], [1, 1], 1)


@pytest.fixture(autouse=True)
def fresh_decisions(fresh_tuning, monkeypatch):
    """Every test: conftest's fresh_tuning, with a longer tuning per key."""
    monkeypatch.setattr(_tune, "KEY_SECONDS", 0.2)


def operands(case, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(case[0], generator=g, dtype=dtype)
    w = torch.randn(case[1], generator=g, dtype=dtype)
    _, _, s, p, d, groups = case
    dy = torch.randn(torch.ops.aten.convolution(x, w, None, s, p, d, False, [0, 0], groups).shape,
                     generator=g, dtype=dtype)
    return x, w, dy


def input_gradient(case, x, w, dy):
    _, _, s, p, d, groups = case
    return torch.ops.bwdconv.convolution_backward_input(dy, w, list(x.shape), s, p, d, groups)


def timer(times):
    """An injected timer: `times[label]` seconds, or a list cycled per call."""
    calls = {}

    def timed(gradient, label):
        value = times.get(label, 1.0)
        if isinstance(value, list):
            calls[label] = calls.get(label, -1) + 1
            return value[calls[label] % len(value)]
        return value
    return timed


def only_entry():
    entries = bwdconv.decisions()
    assert len(entries) == 1, list(entries)
    return next(iter(entries.items()))


def test_choice_follows_the_measurements():
    x, w, dy = operands(STRIDED)
    expected = aten_gradients(dy, x, w, *STRIDED[2:])[0]
    plan = bwdconv.explain(*STRIDED)
    serving = [s for s in bwdconv.strategies("input") if plan.serves(s, "input")]
    assert len(serving) >= 3
    for fastest in serving:
        _C.forget_decisions()
        bwdconv.clear_decisions()
        _tune._state.timer = timer({"aten": 2e-3, fastest: 1e-3})
        bwdconv.reset_served()
        with bwdconv.autotuning():
            result = input_gradient(STRIDED, x, w, dy)
        torch.testing.assert_close(result, expected)
        assert bwdconv.served()["input"][fastest] == 1
        assert bwdconv.served(measured=True)["input"][fastest] == 1
        _, entry = only_entry()
        assert entry["gradients"]["input"]["choice"] == fastest
        assert set(entry["gradients"]["input"]["times"]) >= set(serving)


def test_the_decision_is_kept_and_used_without_tuning_again():
    x, w, dy = operands(STRIDED)
    _tune._state.timer = timer({"aten": 2e-3, "phase": 1e-3})
    with bwdconv.autotuning():
        input_gradient(STRIDED, x, w, dy)
        tuned = _tune._state.tuned
        input_gradient(STRIDED, x, w, dy)
        assert _tune._state.tuned == tuned
    bwdconv.reset_served()
    input_gradient(STRIDED, x, w, dy)  # autotuning off: the decision still applies
    assert bwdconv.served(measured=True)["input"]["phase"] == 1


def test_aten_is_kept_when_nothing_wins_beyond_the_noise():
    x, w, dy = operands(STRIDED)
    # aten varies by +-10% between rounds: a 5% faster candidate is noise.
    _tune._state.timer = timer({"aten": [0.9e-3, 1.1e-3, 1.0e-3, 0.95e-3, 1.05e-3],
                                "phase": 0.95e-3})
    with bwdconv.autotuning():
        input_gradient(STRIDED, x, w, dy)
    _, entry = only_entry()
    decided = entry["gradients"]["input"]
    assert decided["choice"] == "aten", decided
    assert "noise" in decided["reason"]
    assert decided["noise"] >= 0.05


def test_a_pair_of_winners_must_beat_atens_single_call_for_both():
    x, w, dy = operands(STRIDED)
    times = {("input", "aten"): 2e-3, ("input", "phase"): 1e-3, ("weight", "aten"): 2e-3,
             ("both", "aten"): 2.5e-3}
    for pair_time, expected in ((3e-3, "aten"), (1.5e-3, "phase")):
        bwdconv.clear_decisions()
        times[("both", "phase+aten")] = pair_time
        _tune._state.timer = lambda gradient, label: times.get((gradient, label), 1.0)
        bwdconv.reset_served()
        with bwdconv.autotuning():
            torch.ops.bwdconv.convolution_backward(dy, x, w, *STRIDED[2:])
        _, entry = only_entry()
        assert entry["gradients"]["input"]["choice"] == expected, entry
        assert set(entry["both"]["times"]) == {"aten", "phase+aten"}
        assert bwdconv.served()["input"][expected] == 1


def test_the_noise_rule():
    assert _tune.decide({"aten": [1.0] * 5, "phase": [0.99] * 5})[0] == "aten"  # below the floor
    assert _tune.decide({"aten": [1.0] * 5, "phase": [0.9] * 5})[0] == "phase"
    noisy = [0.8, 0.9, 1.0, 1.1, 1.2]  # spread 0.2
    assert _tune.decide({"aten": noisy, "phase": [0.85] * 5})[0] == "aten"
    assert _tune.decide({"aten": noisy, "phase": [0.8] * 5})[0] == "phase"
    assert _tune.decide({"aten": [1.0] * 5, "phase": [0.9, 0.5, 1.3, 0.7, 1.1]})[0] == "aten"


def test_the_noise_rule_pairs_each_round_with_atens():
    """Load that slows one round slows both sides of its pairs alike: a
    candidate 10% faster in every round wins however the rounds vary, while
    one that is faster only in the rounds aten was slowed is noise."""
    loaded = [1.0, 8.0, 1.0, 20.0, 1.0, 3.0]
    assert _tune.decide({"aten": loaded, "phase": [0.9 * t for t in loaded]})[0] == "phase"
    label, _, noise, reason = _tune.decide(
        {"aten": [1.0, 8.0, 1.0, 20.0, 1.0, 3.0], "phase": [1.0, 1.0, 1.05, 1.0, 1.0, 1.0]})
    assert label == "aten" and noise > 0.5 and "noise" in reason


def test_long_tuning_says_what_it_does(capsys, monkeypatch):
    x, w, dy = operands(STRIDED)
    _tune._state.timer = timer({"aten": 2e-3, "phase": 1e-3})
    monkeypatch.setattr(_tune._state, "spent", 0.0)
    monkeypatch.setattr(_tune._state, "reported_at", None)
    with bwdconv.autotuning():
        input_gradient(STRIDED, x, w, dy)  # the first seconds: quiet
        assert capsys.readouterr().err == ""
        _tune._state.spent = _tune.PROGRESS_AFTER_SECONDS + 1
        input_gradient(ONE_BY_ONE, *operands(ONE_BY_ONE))
    assert "bwdconv: autotuning a new shape" in capsys.readouterr().err


def test_a_wrong_candidate_is_excluded_with_a_warning_and_gradients_stay_correct():
    x, w, dy = operands(STRIDED)
    expected = aten_gradients(dy, x, w, *STRIDED[2:])[0]
    _C._testing.set_faults(corrupted="phase")
    _tune._state.timer = timer({"aten": 3e-3, "phase": 1e-3, "scatter": 2e-3})
    with bwdconv.autotuning(), pytest.warns(RuntimeWarning, match=r"phase disagrees with aten"
                                            r".*input gradient of conv input 2x4x9x9"):
        result = input_gradient(STRIDED, x, w, dy)
    torch.testing.assert_close(result, expected)
    _, entry = only_entry()
    decided = entry["gradients"]["input"]
    assert decided["choice"] == "scatter"
    assert "phase" in decided["excluded"] and "phase" not in decided["times"]
    with warnings.catch_warnings(record=True) as again:
        warnings.simplefilter("always")
        torch.testing.assert_close(input_gradient(STRIDED, x, w, dy), expected)
    assert not [w for w in again if "bwdconv" in str(w.message)]  # once per key


def test_lower_precision_candidates_pass_the_accuracy_rule():
    x, w, dy = operands(ONE_BY_ONE, dtype=torch.bfloat16)
    _tune._state.timer = timer({"aten": 2e-3, "swap1x1[fused]": 1e-3})
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        with bwdconv.autotuning():
            input_gradient(ONE_BY_ONE, x, w, dy)
    assert not [w for w in record if "bwdconv" in str(w.message)]
    _, entry = only_entry()
    assert entry["gradients"]["input"]["excluded"] == {}
    assert entry["gradients"]["input"]["choice"] == "swap1x1"


def test_real_timing_measures_every_candidate_and_decides_by_its_medians():
    # The real clock, no injected timer: whichever candidate wins on this
    # machine, each one is timed for at least MIN_ROUNDS rounds and the
    # choice is the one the recorded medians and noise give (the noise rule
    # of _tune's docstring). Which one is faster is the benchmarks' claim.
    case = ((2, 32, 32, 32), (32, 32, 1, 1), [4, 4], [0, 0], [1, 1], 1)
    x, w, dy = operands(case)
    with bwdconv.autotuning():
        input_gradient(case, x, w, dy)
    _, entry = only_entry()
    decided = entry["gradients"]["input"]
    assert "aten" in decided["times"] and len(decided["times"]) >= 3, decided["times"]
    assert all(t["n"] >= _tune.MIN_ROUNDS for t in decided["times"].values())
    ratios = decided["ratios_to_aten"]
    assert set(ratios) == set(decided["times"]) - {"aten"}
    assert all(r["n"] == decided["times"]["aten"]["n"] for r in ratios.values())
    fastest = min(ratios, key=lambda label: ratios[label]["median"])
    noise = max(_tune.NOISE_FLOOR, ratios[fastest]["spread"])
    assert decided["noise"] == pytest.approx(noise, abs=1e-4)
    beats_aten = ratios[fastest]["median"] * (1 + noise) < 1
    rounding = 1e-4 * (1 + noise)  # ratios are stored to 4 digits
    if decided["choice"] == "aten":
        assert ratios[fastest]["median"] * (1 + noise) >= 1 - rounding, decided
    else:
        assert fastest.split("[")[0] == decided["choice"] and (
            beats_aten or abs(ratios[fastest]["median"] * (1 + noise) - 1) <= rounding), decided
        assert decided["speedup"] == pytest.approx(1 / ratios[fastest]["median"], rel=1e-3)
    assert decided["load_average"] is None or decided["load_average"] >= 0


def test_explain_and_explain_model_show_the_measurement():
    x, w, dy = operands(STRIDED)
    _tune._state.timer = timer({"aten": 2e-3, "phase": 1e-3, "phase+aten": 1e-3})
    conv = torch.nn.Conv2d(4, 6, 3, stride=2, padding=1, bias=False)
    with bwdconv.enabled(), bwdconv.autotuning():
        conv(x.requires_grad_()).sum().backward()
    plan = bwdconv.explain(x, conv.weight, 2, 1)
    assert plan.input_strategy == "phase" and plan.to_dict()["input"]["measured"]
    text = str(plan)
    assert "measured on this device" in text and "measured aten: median 2000.0 us" in text
    assert "(measured)" in str(bwdconv.explain_model(conv, x))
    bwdconv.set_autotune(False)
    assert not bwdconv.explain(x, conv.weight, 2, 1, channels_last=True).to_dict()["input"][
        "measured"]


def test_explain_model_shows_a_transposed_forward_as_training_runs_it():
    """A transposed forward autograd records is decided for training: the
    model's table shows that decision, measured, as explain(training=True)."""
    layer = torch.nn.ConvTranspose2d(8, 4, 2, stride=2, bias=False)
    x = torch.randn(2, 8, 6, 6, requires_grad=True)
    _tune._state.timer = timer({"aten": 2e-3, "swap1x1[fused]": 1e-3, "phase_stacked": 3e-3,
                                "phase": 3e-3, "scatter": 3e-3, "relayout": 3e-3})
    with bwdconv.enabled(), bwdconv.autotuning():
        layer(x).sum().backward()
    bwdconv.set_autotune(False)
    explained = bwdconv.explain(x, layer.weight, 2, transposed=True, training=True).to_dict()
    assert explained["input"]["measured"]
    row = bwdconv.explain_model(layer, x).layers[0]
    assert row["forward"] == explained["input"]["strategy"] and row["measured"]["forward"]
    from bwdconv import tune
    rows = tune.decision_rows(bwdconv.decisions())
    assert {r["call"] for r in rows if r["gradient"] == "input"} == {"conv_transpose"}
    assert tune.TRANSPOSED_NOTE in tune.table(rows)


def test_explain_shows_a_first_layers_measured_weight_gradient_as_training_serves_it():
    """A layer whose input needs no gradient (a model's first) is decided for
    its weight gradient alone: explain_model and explain(gradients="weight")
    show that decision, measured, and a step serves it."""
    conv = torch.nn.Conv2d(8, 16, 3, stride=2, padding=1, bias=False)
    x = torch.randn(2, 8, 12, 12)
    _tune._state.timer = timer({"aten": 2e-3, "splitk": 1e-3})
    with bwdconv.enabled(), bwdconv.autotuning():
        conv(x).sum().backward()
    bwdconv.set_autotune(False)
    row = bwdconv.explain_model(conv, x).layers[0]
    assert row["input"] is None and row["weight"] == "splitk" and row["measured"]["weight"]
    explained = bwdconv.explain(x, conv.weight, 2, 1, gradients="weight")
    assert explained.weight_strategy == "splitk" and explained.to_dict()["weight"]["measured"]
    assert "input gradient: not computed" in str(explained)
    assert not bwdconv.explain(x, conv.weight, 2, 1).to_dict()["weight"]["measured"]
    bwdconv.reset_served()
    with bwdconv.enabled():
        conv(x).sum().backward()
    assert bwdconv.served()["weight"] == {**{s: 0 for s in bwdconv.strategies()}, "splitk": 1}
    with pytest.raises(ValueError, match="gradients"):
        bwdconv.explain(x, conv.weight, 2, 1, gradients=())


def test_explain_shows_a_transposed_layers_measured_weight_gradient_as_training_serves_it():
    """A transposed layer's weight gradient is decided as the matching
    convolution's under a key of its own: explain, explain_model and what a
    step serves agree on it, measured."""
    layer = torch.nn.ConvTranspose2d(8, 4, 3, stride=2, bias=False)
    x = torch.randn(2, 8, 6, 6)
    _tune._state.timer = timer({"aten": 2e-3, "splitk": 1e-3})
    with bwdconv.enabled(), bwdconv.autotuning():
        layer(x).sum().backward()
    bwdconv.set_autotune(False)
    explained = bwdconv.explain(x, layer.weight, 2, transposed=True, training=True)
    assert explained.weight_strategy == "splitk" and explained.to_dict()["weight"]["measured"]
    weight_lines = str(explained).split("weight gradient:")[1]
    assert "measured aten: median 2000.0 us" in weight_lines
    assert "measured splitk: median" in weight_lines
    row = bwdconv.explain_model(layer, x).layers[0]
    assert row["weight"] == "splitk" and row["measured"]["weight"]
    bwdconv.reset_served()
    with bwdconv.enabled():
        layer(x).sum().backward()
    assert bwdconv.served()["weight"]["splitk"] == 1


def test_forcing_beats_a_measured_decision():
    x, w, dy = operands(STRIDED)
    _tune._state.timer = timer({"aten": 2e-3, "phase": 1e-3})
    with bwdconv.autotuning():
        input_gradient(STRIDED, x, w, dy)
    bwdconv.reset_served()
    with bwdconv.force_strategy("scatter"):
        input_gradient(STRIDED, x, w, dy)
    assert bwdconv.served()["input"]["scatter"] == 1


def test_no_tuning_once_the_budget_is_spent(monkeypatch):
    monkeypatch.setattr(_tune, "BUDGET_SECONDS", 0.0)
    x, w, dy = operands(STRIDED)
    with bwdconv.autotuning():
        input_gradient(STRIDED, x, w, dy)
    assert bwdconv.decisions() == {}


def test_no_tuning_under_forward_mode_ad_or_fake_tensors():
    import torch.autograd.forward_ad as fwAD
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx

    x, w, dy = operands(STRIDED)
    expected = aten_gradients(dy, x, w, *STRIDED[2:])[0]
    x.requires_grad_()
    conv = torch.nn.functional.conv2d
    with bwdconv.enabled("aten"), bwdconv.autotuning():
        with fwAD.dual_level():
            gx, = torch.autograd.grad(conv(x, w, None, 2, 1), x, dy)
        assert bwdconv.decisions() == {}
        torch.testing.assert_close(gx, expected)

        def backward(dy, w):
            return input_gradient(STRIDED, x, w, dy)
        make_fx(backward, tracing_mode="fake")(dy, w)
        with FakeTensorMode() as mode:
            fake = [mode.from_tensor(t) for t in (dy, x, w)]
            request = {"device": "cpu", "grad_output": fake[0], "input": fake[1],
                       "weight": fake[2]}
            assert _tune._why_not_now(request) == "fake or meta tensors"
        assert bwdconv.decisions() == {}
        torch.autograd.grad(conv(x, w, None, 2, 1), x, dy)  # outside both: it tunes
    assert len(bwdconv.decisions()) == 1


def test_a_key_from_another_device_or_torch_version_is_not_applied():
    x, w, dy = operands(STRIDED)
    _tune._state.timer = timer({"aten": 2e-3, "phase": 1e-3})
    with bwdconv.autotuning():
        input_gradient(STRIDED, x, w, dy)
    key, entry = only_entry()
    device, torch_version, *rest = key.split(" | ")
    foreign = {" | ".join(["cpu Another CPU 64 threads", torch_version, *rest]): entry,
               " | ".join([device, "torch 1.0.0", *rest]): entry}
    path = _cache.path()
    with open(path, "w") as f:
        json.dump({"format": _cache.FORMAT, "version": _cache.VERSION, "entries": foreign}, f)
    _tune._state.cache = _cache.DecisionCache()
    _C.forget_decisions()
    bwdconv.reset_served()
    input_gradient(STRIDED, x, w, dy)
    assert bwdconv.served(measured=True)["input"]["phase"] == 0
    assert bwdconv.served()["input"]["aten"] == 1


def run_python(code, env_extra):
    env = {**os.environ, **env_extra}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env,
                          capture_output=True, text=True, timeout=300)


TUNE_ONE = """
    import torch, bwdconv
    for c in {channels}:
        x = torch.randn(2, c, 9, 9); w = torch.randn(6, c, 3, 3)
        dy = torch.randn(2, 6, 5, 5)
        torch.ops.bwdconv.convolution_backward_input(dy, w, list(x.shape), [2, 2], [1, 1], [1, 1], 1)
    print(len(bwdconv.decisions()))
"""


def test_the_cache_survives_a_round_trip_between_processes(tmp_path):
    env = {"BWDCONV_CACHE_DIR": str(tmp_path / "shared"), "BWDCONV_AUTOTUNE": "1",
           "BWDCONV_AUTOTUNE_KEY_SECONDS": "0.1"}
    tuned = run_python(TUNE_ONE.format(channels=[4]), env)
    assert tuned.returncode == 0, tuned.stderr
    reader = run_python("""
        import torch, bwdconv
        x = torch.randn(2, 4, 9, 9); w = torch.randn(6, 4, 3, 3); dy = torch.randn(2, 6, 5, 5)
        torch.ops.bwdconv.convolution_backward_input(dy, w, list(x.shape), [2, 2], [1, 1], [1, 1], 1)
        print(sum(bwdconv.served(measured=True)["input"].values()), bwdconv.is_autotuning())
    """, {**env, "BWDCONV_AUTOTUNE": "0"})
    assert reader.returncode == 0, reader.stderr
    assert reader.stdout.split() == ["1", "False"]


def test_two_concurrent_writers_keep_both_entries(tmp_path):
    env = {**os.environ, "BWDCONV_CACHE_DIR": str(tmp_path / "shared"), "BWDCONV_AUTOTUNE": "1",
           "BWDCONV_AUTOTUNE_KEY_SECONDS": "0.05"}
    procs = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(TUNE_ONE.format(
        channels=channels))], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True) for channels in ([4, 8, 12], [5, 9, 13])]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    entries = _cache.read_entries(str(tmp_path / "shared" / _cache.FILE_NAME))
    assert len(entries) == 6, list(entries)


@pytest.mark.parametrize("content", [
    "{not json", '{"format": "bwdconv-decisions", "version": 1, "entries": {"k": {"gradi',
    '{"format": "bwdconv-decisions", "version": 99, "entries": {}}', "\x00\x01binary"])
def test_a_corrupt_truncated_or_foreign_version_file_warns_once_and_is_ignored(content):
    os.makedirs(_cache.directory(), exist_ok=True)
    with open(_cache.path(), "w") as f:
        f.write(content)
    x, w, dy = operands(STRIDED)
    _tune._state.timer = timer({"aten": 2e-3, "phase": 1e-3})
    with pytest.warns(RuntimeWarning, match="ignoring the decisions cache") as record:
        with bwdconv.autotuning():
            input_gradient(STRIDED, x, w, dy)
    assert sum("decisions cache" in str(r.message) for r in record) == 1
    assert len(_cache.read_entries(_cache.path())) == 1  # rewritten, the entry is there
    with open(_cache.path() + ".corrupt") as f:
        assert f.read() == content  # set aside, not lost


def test_a_malformed_entry_is_dropped_alone():
    os.makedirs(_cache.directory(), exist_ok=True)
    good = {"gradients": {"input": {"choice": "phase", "reason": "r"}}}
    with open(_cache.path(), "w") as f:
        json.dump({"format": _cache.FORMAT, "version": _cache.VERSION,
                   "entries": {"good": good, "bad": {"gradients": 3}}}, f)
    assert _cache.read_entries(_cache.path()) == {"good": good}


def test_a_read_only_cache_directory_warns_once_and_tunes_in_memory(tmp_path, monkeypatch):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    monkeypatch.setenv("BWDCONV_CACHE_DIR", str(blocker / "cache"))  # cannot be created
    x, w, dy = operands(STRIDED)
    _tune._state.timer = timer({"aten": 2e-3, "phase": 1e-3})
    with pytest.warns(RuntimeWarning, match="cannot write the decisions cache") as record:
        with bwdconv.autotuning():
            input_gradient(STRIDED, x, w, dy)
            input_gradient(*((ONE_BY_ONE,) + operands(ONE_BY_ONE)))
    assert sum("cannot write" in str(r.message) for r in record) == 1
    assert len(bwdconv.decisions()) == 2
    bwdconv.reset_served()
    input_gradient(STRIDED, x, w, dy)
    assert bwdconv.served(measured=True)["input"]["phase"] == 1


def test_offline_tuning_fills_the_cache_shows_and_clears(capsys):
    from bwdconv import tune

    _tune._state.timer = timer({"aten": 2e-3, "phase": 1e-3, "phase+aten": 1e-3})
    _tune._state.call_cost = 1e-4  # the op's per-call cost, added to phase's time
    line = "conv -n 2 -c 4 -H 9 -W 9 -k 6 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 -F 0".split()
    assert tune.main(line) == 0
    out = capsys.readouterr().out
    assert "1 new decisions" in out
    row = next(r for r in out.splitlines() if r.startswith("2x4x9x9") and " input " in r)
    assert "aten" in row and "phase" in row and "1.82x" in row  # rules, tuned, 2 / 1.1
    assert tune.main(["--show"]) == 0
    assert "2x4x9x9 w 6x4x3x3" in capsys.readouterr().out
    assert tune.main(["--clear"]) == 0
    assert bwdconv.decisions() == {} and not os.path.exists(_cache.path())


def test_the_benchmark_has_a_tuned_column(tmp_path):
    from bwdconv.bench import cli

    _tune._state.timer = timer({"aten": 2e-3, "phase": 1e-3})
    line = "conv -n 2 -c 4 -H 9 -W 9 -k 6 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 -F 2".split()
    # Unscaled: at 1/8 the image is one pixel, whose few bytes phase's buffers exceed.
    assert cli.main(["--scale", "1", "--iter", "2", "--warmup", "1", "--out", str(tmp_path),
                     *line]) == 0
    rows = json.loads((tmp_path / "results.json").read_text())["results"]
    tuned = next(r for r in rows if r["strategy"] == "tuned")
    assert tuned["tuned"] == "phase" and tuned["plan"] == "aten"
    assert "| tuned |" in (tmp_path / "report.md").read_text()


# STRIDED's input gradient: 2 x 4 x 9 x 9 float32 values.
STRIDED_GRADIENT_BYTES = 2 * 4 * 9 * 9 * 4


def peaks(values):
    """An injected peak: `values[label]` bytes, measured bytes for other labels."""
    return lambda gradient, label, measured: values.get(label, measured)


def tuned_input_entry(x, w, dy):
    with bwdconv.autotuning():
        input_gradient(STRIDED, x, w, dy)
    _, entry = only_entry()
    return entry["gradients"]["input"]


def test_a_fast_candidate_above_the_memory_budget_is_refused():
    x, w, dy = operands(STRIDED)
    _tune._state.timer = timer({"aten": 2e-3, "scatter": 1e-3, "phase": 1.5e-3})
    aten = 10**6
    for scatter_peak, expected in ((aten + STRIDED_GRADIENT_BYTES, "scatter"),
                                   (aten + STRIDED_GRADIENT_BYTES + 1, "phase")):
        bwdconv.clear_decisions()
        _tune._state.peak = peaks({"aten": aten, "scatter": scatter_peak, "phase": aten})
        decided = tuned_input_entry(x, w, dy)
        assert decided["choice"] == expected, decided
        assert decided["memory_budget_bytes"] == STRIDED_GRADIENT_BYTES
        assert decided["peak_bytes"]["scatter"] == scatter_peak
    assert "memory budget" in decided["excluded"]["scatter"]
    assert "scatter" not in decided["times"]


# A shape whose input gradient the CPU rules give to phase (float16
# channels_last, docs/DESIGN.md "Kernel rules"); 8192 float16 values of dx.
RULES_PHASE = ((1, 32, 16, 16), (64, 32, 3, 3), [2, 2], [1, 1], [1, 1], 1)
RULES_PHASE_GRADIENT_BYTES = 32 * 16 * 16 * 2


def test_the_rules_strategy_is_never_excluded_for_memory():
    """Tuning never gives up the rules' plan, which runs without it, for
    memory: a candidate within the rules' strategy's peak stays, one above it
    and above aten's peak plus the budget goes."""
    assert bwdconv.explain(*RULES_PHASE, dtype=torch.float16,
                           channels_last=True).input_strategy == "phase"
    x, w, dy = (t.to(memory_format=torch.channels_last)
                for t in operands(RULES_PHASE, torch.float16))
    aten, budget = 10**6, RULES_PHASE_GRADIENT_BYTES
    _tune._state.timer = timer({"aten": 3e-3, "scatter": 1e-3, "phase": 2e-3,
                                "phase_stacked": 2.5e-3})
    _tune._state.peak = peaks({"aten": aten, "phase": aten + 3 * budget,
                               "phase_stacked": aten + 2 * budget, "scatter": aten + 4 * budget})
    with bwdconv.autotuning():
        input_gradient(RULES_PHASE, x, w, dy)
    _, entry = only_entry()
    decided = entry["gradients"]["input"]
    assert decided["choice"] == "phase", decided
    assert set(decided["excluded"]) == {"scatter"}
    assert "the rules' plan's" in decided["excluded"]["scatter"]


@pytest.mark.parametrize("scope", ["functional", "aten"])
def test_atens_peak_is_its_own_kernels_in_either_scope(scope):
    """The memory budget's baseline is aten's kernel, not the aten scope's
    plan of the same call (the rules give this shape to phase and splitk)."""
    x = torch.randn(RULES_PHASE[0], dtype=torch.float16).to(memory_format=torch.channels_last)
    w = torch.randn(RULES_PHASE[1], dtype=torch.float16)
    x.requires_grad_()
    w.requires_grad_()
    out = torch.nn.functional.conv2d(x, w, None, 2, 1)
    dy = torch.randn_like(out)
    mask = [True, True, False]
    with bwdconv.peak_memory("cpu") as own:
        torch.ops.aten.convolution_backward(dy, x.detach(), w.detach(), None, *RULES_PHASE[2:5],
                                            False, [0, 0], 1, mask)
    with bwdconv.enabled(scope), bwdconv.autotuning():
        torch.nn.functional.conv2d(x, w, None, 2, 1).backward(dy)
    _, entry = only_entry()
    atens = [entry["gradients"][g]["peak_bytes"]["aten"] for g in ("input", "weight")]
    assert all(0 < peak <= own.bytes for peak in atens), (atens, own.bytes)


def test_the_memory_budget_is_a_byte_count_or_a_factor_of_atens_peak():
    x, w, dy = operands(STRIDED)
    _tune._state.timer = timer({"aten": 2e-3, "scatter": 1e-3})
    _tune._state.peak = peaks({"aten": 1000, "scatter": 1500})
    for budget, expected in (("1.5x", "scatter"), ("1.49x", "aten"), (500, "scatter"),
                             ("499", "aten")):
        bwdconv.clear_decisions()
        bwdconv.enable(memory_budget=budget)
        assert tuned_input_entry(x, w, dy)["choice"] == expected, budget


def test_a_memory_budget_that_is_not_one_raises():
    assert _memory.parse_memory_budget(" 2x ") == ("factor", 2.0)
    assert _memory.parse_memory_budget("gradient") == ("gradient", None)
    for wrong in ("1.5", "-3", "x", "-1x", "64MB", 1.5, True):
        with pytest.raises(ValueError, match="memory_budget=.*: expected 'gradient', a byte "
                                             "count or a factor"):
            bwdconv.enable(memory_budget=wrong)
    env = dict(os.environ, BWDCONV_MEMORY_BUDGET="lots")
    result = subprocess.run([sys.executable, "-c", "import bwdconv"], env=env,
                            capture_output=True, text=True)
    assert result.returncode != 0
    assert "BWDCONV_MEMORY_BUDGET='lots': expected 'gradient'" in result.stderr


def test_measured_peaks_are_stored_and_explained():
    x, w, dy = operands(STRIDED)
    _tune._state.timer = timer({"aten": 2e-3, "phase": 1e-3, "phase+aten": 1e-3})
    _tune._state.call_cost = 0.0
    conv = torch.nn.Conv2d(4, 6, 3, stride=2, padding=1, bias=False)
    with bwdconv.enabled(), bwdconv.autotuning():
        conv(x.requires_grad_()).backward(dy)
    _, entry = only_entry()
    decided = entry["gradients"]["input"]
    assert decided["choice"] == "phase"
    # Each candidate returns the 2592-byte gradient; work buffers come on top.
    assert all(p >= STRIDED_GRADIENT_BYTES for p in decided["peak_bytes"].values())
    assert decided["memory_budget_bytes"] == STRIDED_GRADIENT_BYTES

    def pytorch_input_gradient():  # aten's baseline: PyTorch's own call, its operands given
        return torch.ops.aten.convolution_backward(dy, x.detach(), w, None, *STRIDED[2:5], False,
                                                   [0, 0], 1, [True, False, False])[0]
    pytorch_input_gradient()
    assert decided["peak_bytes"]["aten"] == bwdconv._memory.peak_bytes(pytorch_input_gradient,
                                                                       "cpu")
    text = str(bwdconv.explain(x, conv.weight, 2, 1))
    peak = decided["peak_bytes"]["phase"]
    assert "measured phase: median 1000.0 us (p25 1000.0, p75 1000.0, " in text
    assert f"runs), peak {peak / 1e6:.3g} MB" in text
    assert "memory budget: 0.00259 MB above aten's peak" in text


def test_call_costs_are_measured_on_the_calling_thread_whatever_its_state():
    """bwdconv._overhead measures a call's cost where it is asked, inside a
    backward pass, under no_grad or inference mode, and leaves that state,
    the served counts and the thread's tuning mark as they were."""
    from bwdconv import _overhead

    bwdconv.reset_served()
    measured = []

    def inside_backward(grad):
        measured.append(_overhead._measured_here())
        return grad
    x = torch.randn(2, 3, requires_grad=True)
    x.register_hook(inside_backward)
    (x * 2).sum().backward()
    with torch.no_grad():
        measured.append(_overhead._measured_here())
        assert not torch.is_grad_enabled()
    with torch.inference_mode():
        measured.append(_overhead._measured_here())
        assert torch.is_inference_mode_enabled()
    for costs in measured:
        assert set(costs) == {"pass_through", "op"}
        assert all(0 <= seconds < 1e-3 for seconds in costs.values()), costs
    assert not _C.tuning_on_this_thread()
    assert all(n == 0 for counts in bwdconv.served().values() for n in counts.values())


def test_calls_per_sample_fill_a_millisecond_from_the_fastest_candidate():
    """The GPU sample's call count (_tune.calls_per_sample): enough calls that
    the fastest candidate's sample lasts SAMPLE_SECONDS, one count for all,
    at least 1, at most MAX_CALLS_PER_SAMPLE, and no more than lets
    MIN_ROUNDS rounds fit in the key's cap."""
    count = _tune.calls_per_sample
    assert _tune.SAMPLE_SECONDS == 1e-3 and _tune.MAX_CALLS_PER_SAMPLE == 32
    # U-Net's ConvTranspose2d k2 s2 bfloat16 on an H200: aten, phase,
    # phase_stacked, relayout, swap1x1[fused] (us).
    unet = [215.5e-6, 248.5e-6, 212.5e-6, 413.3e-6, 179.0e-6]
    assert count(unet, cap=2.0) == 6        # ceil(1000 / 179): not 1 from the slowest
    assert count([150e-6, 200e-6], cap=2.0) == 7
    assert count([250e-6], cap=2.0) == 4
    assert count([1e-3, 2e-3], cap=2.0) == 1  # a call already lasts 1 ms
    assert count([5e-3], cap=2.0) == 1
    assert count([5e-6, 300e-6], cap=2.0) == 32  # capped
    assert count([0.0, 0.0], cap=2.0) == 32      # a clock too coarse: capped, no division by 0
    # The key's cap: 5 rounds of 4 x 100 us (2 ms a call each) in 10 ms: 5 calls, not 10.
    assert count([100e-6] * 4, cap=0.01) == 5
    assert count([100e-6, 0.5], cap=0.1) == 1     # never below one call


class _FakeGpu:
    """torch.cuda.Event on a fake clock that candidates advance: records which
    calls ran between each start and end event."""

    def __init__(self):
        self.now, self.ran, self.spans = 0.0, [], []
        gpu = self

        class Event:
            def __init__(self, enable_timing=False):
                assert enable_timing
                self.at = None

            def record(self):
                self.at = gpu.now
                self.mark = len(gpu.ran)

            def synchronize(self):
                pass

            def elapsed_time(self, end):  # milliseconds, as CUDA's
                gpu.spans.append(gpu.ran[self.mark:end.mark])
                return (end.at - self.at) * 1e3
        self.Event = Event

    def candidate(self, label, seconds):
        def fn():
            self.now += seconds
            self.ran.append(label)
        return fn


@pytest.mark.parametrize("injected", [False, True])
def test_gpu_samples_time_several_back_to_back_calls(injected, monkeypatch):
    """On a GPU each sample times calls_per_sample calls of one candidate
    between one pair of events, the same count for every candidate, chosen
    after the warm-up from one timed call each, and divides by the count; an
    injected timer still replaces each sample."""
    gpu = _FakeGpu()
    monkeypatch.setattr(torch.cuda, "Event", gpu.Event)
    _tune._state.call_cost = 0.0
    if injected:
        _tune._state.timer = timer({"aten": 2e-3, "phase": 1e-3})
    times = {"aten": 215e-6, "phase": 179e-6, "scatter": 849e-6}
    fns = {label: gpu.candidate(label, seconds) for label, seconds in times.items()}
    samples, calls = _tune._time("input", fns, torch.device("cuda"), cap=2.0)
    assert calls == 6  # ceil(1 ms / 179 us)
    # The warm-up (untimed), then one timed call each that chose the count.
    assert gpu.ran[:3] == list(times)
    probes, batched = gpu.spans[:3], gpu.spans[3:]
    assert probes == [[label] for label in times]
    assert len(batched) == sum(len(s) for s in samples.values()) >= 3 * _tune.MIN_ROUNDS
    assert all(len(span) == calls and len(set(span)) == 1 for span in batched), batched
    for label, s in samples.items():
        expected = {"aten": 2e-3, "phase": 1e-3}.get(label, 1.0) if injected else times[label]
        assert s == pytest.approx([expected] * len(s))


def test_cpu_samples_time_one_call(monkeypatch):
    """On the CPU a sample is one call on the monotonic clock: each candidate
    runs once for the warm-up and once per sample, with no count to choose."""
    _tune._state.call_cost = 0.0
    ran = {"aten": 0, "phase": 0}

    def candidate(label):
        def fn():
            ran[label] += 1
        return fn
    samples, calls = _tune._time("input", {label: candidate(label) for label in ran},
                                 torch.device("cpu"), cap=0.05)
    assert calls == 1
    assert all(ran[label] == 1 + len(s) for label, s in samples.items()), (ran, samples)


def test_the_decision_records_its_calls_per_sample():
    x, w, dy = operands(STRIDED)
    _tune._state.timer = timer({"aten": 2e-3, "phase": 1e-3})
    with bwdconv.autotuning():
        input_gradient(STRIDED, x, w, dy)
    _, entry = only_entry()
    assert entry["gradients"]["input"]["calls_per_sample"] == 1  # the CPU times one call
