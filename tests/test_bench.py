"""The benchmark harness: suites end to end, its columns and report, kernel bytes."""

import io
import json
import os
import pathlib
import re
import statistics
import sys

import pytest
import torch

import bwdconv

from bwdconv._progress import progress_bar
from bwdconv.bench import parse_line, report
from bwdconv.bench.cli import main as bench_main
from bwdconv.bench.driver import BACKWARD_DATA, BACKWARD_WEIGHT, FORWARD
from bwdconv.bench.kernels import is_kernel_of, kernel_bytes, kernels


def run_checked_suite(tmp_path, name, lines):
    """The bench on a suite file of `lines` at full size, two checked
    iterations on the CPU; returns its output directory."""
    suite = tmp_path / f"{name}.txt"
    suite.write_text(lines)
    out = tmp_path / "out"
    assert bench_main(["--suite", str(suite), "--scale", "1", "--iter", "2", "--warmup", "1",
                       "--check", "--device", "cpu", "--out", str(out)]) == 0
    return out


def test_tiny_suite_end_to_end(tmp_path, capsys):
    out = run_checked_suite(
        tmp_path, "tiny",
        "# two shapes\n"
        "conv -n 2 -c 4 -H 9 -W 9 -k 8 -y 1 -x 1 -u 2 -v 2 -F 2\n"
        "conv -n 1 -c 2 --in_d 5 -H 6 -W 6 -k 2 --fil_d 3 -y 3 -x 3 --pad_d 1 "
        "-p 1 -q 1 --conv_stride_d 2 -u 2 -v 2 --spatial_dim 3 -F 7\n")
    printed = capsys.readouterr().out
    assert "swap1x1" in printed and "bwd_weight" in printed
    data = json.loads((out / "results.json").read_text())
    assert data["meta"]["device_type"] == "cpu" and data["meta"]["torch"] == torch.__version__
    results = data["results"]
    assert all(r["status"] == "ok" for r in results)
    strategies = {(r["index"], r["direction"], r["strategy"]) for r in results}
    assert (0, "bwd_data", "swap1x1") in strategies
    served = bwdconv.explain([1, 2, 5, 6, 6], [2, 2, 3, 3, 3], 2, 1)  # the second case
    expected_data = ["aten", "bwdconv"] + [s for s in bwdconv.strategies("input")
                                          if s != "aten" and served.serves(s, "input")]
    assert {(1, "bwd_data", s) for s in expected_data} <= strategies
    assert (1, "bwd_weight", "splitk") in strategies and (1, "fwd", "aten") in strategies
    for r in results:
        assert r["median_ms"] > 0 and r["p10_ms"] <= r["median_ms"] <= r["p90_ms"]
        assert r["speedup"] > 0 and 0 < r["roofline"]
    # Every call's peak holds its result at least: case 0's dx, 2x4x9x9 float32.
    assert {r["result_bytes"] for r in results if (r["index"], r["direction"]) ==
            (0, "bwd_data")} == {2 * 4 * 9 * 9 * 4}
    assert all(r["peak_bytes"] >= r["result_bytes"] for r in results)
    csv_header = (out / "results.csv").read_text().splitlines()[0]
    assert csv_header.startswith("index,case,from,direction") and "peak_bytes" in csv_header
    report = (out / "report.md").read_text()
    assert "| case | from | dir | plan |" in report and "Peak memory one call adds" in report
    assert "peaks above aten's peak plus the gradient's bytes (the default memory budget): " \
        in report
    assert "peak memory added per call" in printed
    assert (out / "speedup.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_report_names_planned_and_tuned_peaks_above_the_default_budget():
    def row(strategy, peak, **fields):
        return {"index": 0, "case": "conv n1", "direction": "bwd_data", "strategy": strategy,
                "status": "ok", "plan": "scatter", "tuned": "phase", "peak_bytes": peak,
                "result_bytes": 100, **fields}

    rows = [row("aten", 1000), row("bwdconv", 1101), row("tuned", 1100), row("scatter", 5000)]
    assert report.above_budget(rows) == [("conv n1", "bwd_data", "bwdconv", "scatter", 1101, 1100)]
    rows[2] = row("tuned", 1200, tuned="-")  # no decision: the tuned column ran the rules' plan
    assert [a[2:4] for a in report.above_budget(rows)] == [("bwdconv", "scatter"),
                                                           ("tuned", "scatter")]


def test_transposed_suite_end_to_end(tmp_path, capsys):
    """A transposed line times its forward (aten's transposed convolution and
    every input-gradient strategy that serves the matching convolution), its
    input gradient (aten alone) and its weight gradient, each checked."""
    out = run_checked_suite(
        tmp_path, "trans",
        "conv -m trans -n 2 -c 8 -H 5 -W 5 -k 4 -y 2 -x 2 -u 2 -v 2 -F 7\n"
        "conv -m trans -n 1 -c 4 -H 4 -W 5 -k 6 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 "
        "-Y 1 -X 1 -F 1 --in_layout NHWC --out_layout NHWC\n")
    results = json.loads((out / "results.json").read_text())["results"]
    assert all(r["status"] == "ok" for r in results), [r for r in results if r["status"] != "ok"]
    rows = {(r["index"], r["direction"], r["strategy"]) for r in results}
    for strategy in ["bwdconv", "tuned"] + bwdconv.strategies("input"):
        assert (0, "fwd", strategy) in rows  # kernel = stride: every strategy serves
    assert {s for i, d, s in rows if (i, d) == (0, "bwd_data")} == {"aten"}
    assert {(0, "bwd_weight", "splitk"), (1, "fwd", "phase")} <= rows
    assert (1, "fwd", "swap1x1") not in rows  # a 3x3 filter overlaps at stride 2
    assert all(r["max_error"] <= 1e-4 for r in results if "max_error" in r)


class Terminal(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self):
        return True


def test_progress_bars_show_on_a_terminal_only():
    quiet, terminal = io.StringIO(), Terminal()
    for stream in (quiet, terminal):
        assert list(progress_bar(range(3), desc="items", unit="item", stream=stream)) == [0, 1, 2]
    assert quiet.getvalue() == ""
    assert "items" in terminal.getvalue() and "0/3" in terminal.getvalue()


def test_the_bench_shows_each_line_it_runs_on_a_terminal(tmp_path, monkeypatch, capsys):
    lines = ["--iter", "1", "--warmup", "0", "--scale", "1", "--device", "cpu", "--out",
             str(tmp_path), "conv", "-n", "1", "-c", "2", "-H", "5", "-W", "5", "-k", "2", "-y",
             "1", "-x", "1", "-F", "2", "conv", "-n", "1", "-c", "2", "-H", "7", "-W", "7", "-k",
             "2", "-y", "1", "-x", "1", "-F", "2"]
    assert bench_main(lines) == 0
    assert "bench" not in capsys.readouterr().err  # stderr is no terminal here
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert bench_main(lines) == 0
    shown = terminal.getvalue()
    assert "bench" in shown and "0/2" in shown and "1/2" in shown
    assert "5x5" in shown and "7x7" in shown, shown


def test_both_swap1x1_writers_are_timed_where_both_serve(tmp_path):
    """A channels_last 1x1 stride-2 case whose slots form one strided batch
    gets a row per writer; an NCHW one gets the single swap1x1 row."""
    out = run_checked_suite(
        tmp_path, "writers",
        "conv -n 2 -c 4 -H 8 -W 9 -k 8 -y 1 -x 1 -u 2 -v 2 -F 2 "
        "--in_layout NHWC --out_layout NHWC\n"
        "conv -n 2 -c 4 -H 8 -W 9 -k 8 -y 1 -x 1 -u 2 -v 2 -F 2\n")
    results = json.loads((out / "results.json").read_text())["results"]
    assert all(r["status"] == "ok" for r in results)
    names = {(r["index"], r["strategy"]) for r in results if r["strategy"].startswith("swap1x1")}
    assert names == {(0, "swap1x1[fused]"), (0, "swap1x1[in_place]"), (1, "swap1x1")}


# A float32 NCHW 1x1 stride-2 input gradient, one call timed.


ONE_LINE = ["conv", "-n", "2", "-c", "4", "-H", "8", "-W", "9", "-k", "8", "-y", "1", "-x", "1",
            "-u", "2", "-v", "2", "-F", "2"]


def one_line_results(tmp_path, *options):
    """The results rows of ONE_LINE benched once on the CPU with `options`."""
    out = tmp_path / "out"
    assert bench_main([*options, "--iter", "1", "--warmup", "0", "--scale", "1", "--device", "cpu",
                       "--out", str(out), *ONE_LINE]) == 0
    return json.loads((out / "results.json").read_text())["results"]


def test_layout_option_puts_every_case_in_one_layout(tmp_path):
    results = one_line_results(tmp_path, "--layout", "channels_last")
    assert {r["strategy"] for r in results} >= {"swap1x1[fused]", "swap1x1[in_place]"}
    assert all("NHWC" in r["case"] and "--in_layout NHWC" in r["line"] for r in results)
    with pytest.raises(SystemExit):
        bench_main(["--layout", "NHWC", *ONE_LINE])


def test_dtype_option_puts_every_case_in_one_dtype(tmp_path):
    results = one_line_results(tmp_path, "--dtype", "bfloat16")
    assert results and all(r["line"].startswith("convbfp16 ") for r in results)
    with pytest.raises(SystemExit):
        bench_main(["--dtype", "float64", *ONE_LINE])


def test_bound_benchmark_times_kernel_equals_stride_lines_against_gemm_and_write(capsys):
    from bwdconv.bench import bound

    assert bound.main(["--scale", "8", "--iter", "1", "--dtype", "float32", "--device",
                       "cpu"]) == 0
    lines = capsys.readouterr().out.splitlines()[1:]
    # transposed.txt's kernel = stride lines: U-Net 2D (three) and 3D (one).
    assert len(lines) == 4 and all(re.search(r" 2x2(x2)?/2x2(x2)? .*trans", l) for l in lines)
    for l in lines:
        ratios = [float(r) for r in re.findall(r"\(([0-9.]+)\)", l)]
        assert len(ratios) == 3 and all(0 < r for r in ratios), l


def test_command_line_lines_and_errors(tmp_path, capsys):
    out = tmp_path / "out"
    bench_main(["--iter", "1", "--warmup", "0", "--scale", "1", "--out", str(out),
                "conv", "-n", "1", "-c", "2", "-H", "6", "-W", "6", "-k", "2", "-y", "3", "-x", "3",
                "-u", "2", "-v", "2", "-F", "2"])
    assert "bwd_data" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="unknown flag '-G'"):
        bench_main(["conv", "-n", "1", "-G", "2"])
    with pytest.raises(SystemExit, match="unknown suite 'nope'"):
        bench_main(["--suite", "nope"])


def test_3d_line_with_punctuation_flags_runs(tmp_path, capsys):
    bench_main(["--iter", "1", "--warmup", "0", "--out", str(tmp_path), "conv", "-n", "1",
                "-c", "4", "-H", "8", "-W", "8", "-k", "4", "-y", "3", "-x", "3",
                "--spatial_dim", "3", "-!", "6", "-@", "3", "-#", "2", "-F", "4"])
    assert "bwd_weight" in capsys.readouterr().out


def test_kernel_bytes_count_each_element_once():
    """1x1, stride 2 on 8x8: dx (2*3*8*8 elements) is written once and the
    4x4 result read once (in_place: only the holes written); scatter reads the
    4x4 grad_output of 5 channels and writes a buffer that a stride-1 1x1
    convolution maps onto 8x8 dx: 8x8. relayout's transposes read and write
    each tensor they convert once."""
    case = parse_line("conv -n 2 -c 3 -k 5 -H 8 -W 8 -y 1 -x 1 -u 2 -v 2 -p 0 -q 0")
    plan = bwdconv.explain(case.input_size(), case.weight_size(), 2, 0).to_dict()
    assert sum(kernel_bytes("swap1x1", "fused", plan, case, 4)) == 4 * (2 * 3 * 64 + 2 * 3 * 16)
    # in_place: the GEMM filled the 4x4 slots; the pass only zeroes the other 48 of 64.
    assert sum(kernel_bytes("swap1x1", "in_place", plan, case, 4)) == 4 * (2 * 3 * 48)
    assert sum(kernel_bytes("scatter", None, plan, case, 2)) == 2 * (2 * 5 * 64 + 2 * 5 * 16)
    # relayout: grad_output (2x5x4x4) there and dx (2x3x8x8) back, each read and
    # written once; the 1x1 weight is channels_last as it is.
    assert sum(kernel_bytes("relayout", None, plan, case, 2)) == 2 * 2 * (2 * 5 * 16 + 2 * 3 * 64)
    case3 = parse_line("conv -n 2 -c 3 -k 5 -H 8 -W 8 -y 3 -x 3 -u 2 -v 2 -p 1 -q 1")
    plan3 = bwdconv.explain(case3.input_size(), case3.weight_size(), 2, 1).to_dict()
    assert sum(kernel_bytes("relayout", None, plan3, case3, 4)) == \
        4 * 2 * (2 * 5 * 16 + 2 * 3 * 64 + 5 * 3 * 9)


def test_the_kernel_benchmark_times_every_walk_of_a_strategys_kernel_and_nothing_else():
    """Each __global__ kernel of a strategy's .cu file (its row and dense
    walks), as the profiler names it, counts for that strategy; torch's
    own kernels of a similar name and the other family's do not."""
    walks = {"scatter": 2, "interleave": 2, "relayout": 1}  # __global__ kernels per file
    families = set(kernels().values())
    assert families == set(walks)
    hip = pathlib.Path(__file__).resolve().parents[1] / "csrc" / "hip"
    for family in families:
        defined = re.findall(r"__global__ void __launch_bounds__\([^)]*\)\s+(\w+)\(",
                             (hip / f"{family}.cu").read_text())
        assert len(defined) == walks[family], defined
        for name in defined:
            event = (f"void bwdconv::hip::(anonymous namespace)::{name}<unsigned short, int, 2, 2>"
                     f"(bwdconv::hip::{family.capitalize()}Params, int)")
            assert is_kernel_of(event, family)
            assert not any(is_kernel_of(event, other) for other in families - {family})
    for foreign in ("void at::native::_scatter_gather_elementwise_kernel<128, 4>(int)",
                    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor>()"):
        assert not any(is_kernel_of(foreign, family) for family in families)


def test_a_transposed_line_as_its_matching_convolution():
    """The convolution whose input gradient a transposed line's forward is:
    its input the transposed output, its output the transposed input, the
    same weight; forward and input gradient trade places."""
    line = parse_line("convfp16 -m trans -n 2 -c 8 -H 5 -W 7 -k 6 -y 3 -x 3 -p 1 -q 1 "
                      "-u 2 -v 2 -Y 1 -X 0 -F 5")
    conv = line.as_convolution()
    assert conv.as_convolution() is conv and not conv.transposed
    assert conv.directions == BACKWARD_DATA | BACKWARD_WEIGHT
    assert conv.weight_size() == line.weight_size() == [8, 6, 3, 3]
    x = torch.randn(line.input_size())
    w = torch.randn(line.weight_size())
    y = torch.nn.functional.conv_transpose2d(x, w, stride=2, padding=1, output_padding=(1, 0))
    assert conv.input_size() == list(y.shape)
    assert torch.nn.functional.conv2d(y, w, stride=2, padding=1).shape == x.shape
    assert parse_line(line.to_line().replace("-F 5", "-F 2")).as_convolution().directions == \
        FORWARD


def test_bench_columns_pay_the_pass_through_for_aten_and_the_op_for_a_strategy(monkeypatch):
    """A call planned for aten costs aten's own time plus the lookup (it
    passes through); a strategy its own time plus the op's per-call cost."""
    from bwdconv import _overhead
    from bwdconv.bench import run

    monkeypatch.setattr(_overhead, "call_costs", lambda: {"op": 20e-6, "pass_through": 1e-6})
    times = {"aten": [1.0, 2.0], "bwdconv": [5.0, 5.0], "tuned": [0.5, 0.6], "phase": [0.5]}
    run.add_call_costs(times, {"bwdconv": "aten", "tuned": "phase"})
    assert times["bwdconv"] == pytest.approx([1.001, 2.001])
    assert times["tuned"] == pytest.approx([0.52, 0.62])
    assert times["aten"] == [1.0, 2.0] and times["phase"] == [0.5]


def test_bench_peaks_of_a_call_planned_for_aten_are_atens_own():
    """A call planned for aten passes through, so its column takes aten's
    peak, not that of bwdconv's op; a strategy keeps its own."""
    from bwdconv.bench import run

    peaks = {"aten": 100, "bwdconv": 144, "tuned": 50, "phase": 50}
    run.add_call_peaks(peaks, {"bwdconv": "aten", "tuned": "phase"})
    assert peaks == {"aten": 100, "bwdconv": 100, "tuned": 50, "phase": 50}


def test_the_cudnn_benchmark_flag_is_applied_for_the_run_and_reported(tmp_path, monkeypatch,
                                                                      capsys):
    """--cudnn-benchmark sets torch.backends.cudnn.benchmark while the cases
    run (aten and bwdconv alike), puts the caller's setting back, and the
    header, the JSON and the report name it; without the flag the run keeps
    the caller's setting and says so."""
    from bwdconv.bench import cli

    seen = []
    real_run_case = cli.run_case

    def recording_run_case(*args, **kwargs):
        seen.append(torch.backends.cudnn.benchmark)
        return real_run_case(*args, **kwargs)

    monkeypatch.setattr(cli, "run_case", recording_run_case)
    line = ["conv", "-n", "1", "-c", "2", "-H", "5", "-W", "5", "-k", "2", "-y", "1", "-x", "1",
            "-F", "1"]
    common = ["--iter", "1", "--warmup", "0", "--scale", "1", "--device", "cpu"]
    for caller, flag, expected in ((False, "on", True), (True, "off", False),
                                   (True, None, True), (False, None, False)):
        monkeypatch.setattr(torch.backends.cudnn, "benchmark", caller)
        out = tmp_path / f"{caller}-{flag}"
        options = ["--cudnn-benchmark", flag] if flag else []
        seen.clear()
        assert bench_main([*options, *common, "--out", str(out), *line]) == 0
        assert seen == [expected]
        assert torch.backends.cudnn.benchmark is caller  # the caller's setting is back
        state = "on" if expected else "off"
        header = capsys.readouterr().out.splitlines()[1]
        assert header.startswith(f"cudnn.benchmark {state} ("), header
        assert ("set by --cudnn-benchmark" in header) == (flag is not None)
        meta = json.loads((out / "results.json").read_text())["meta"]
        assert meta["cudnn_benchmark"].startswith(f"{state} (")
        assert f"- cudnn_benchmark: {state} (" in (out / "report.md").read_text()


def test_lines_that_scale_to_one_shape_are_timed_once_and_named(tmp_path, capsys):
    """At 1/8 three seed-like lines that differ only in a batch below 8 are
    one convolution: one row, timed once, naming the three lines; a line
    that stays distinct keeps its own row and names its own line."""
    suite = tmp_path / "batches.txt"
    suite.write_text(
        "# three batches, one shape at 1/8\n"
        "convbfp16 -n 1 -c 3 -H 94 -W 145 -k 32 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 -F 1\n"
        "convbfp16 -n 5 -c 3 -H 94 -W 145 -k 32 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 -F 1\n"
        "convbfp16 -n 3 -c 3 -H 94 -W 145 -k 32 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 -F 1\n"
        "convbfp16 -n 16 -c 3 -H 94 -W 145 -k 32 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 -F 1\n")
    out = tmp_path / "out"
    assert bench_main(["--suite", str(suite), "--scale", "8", "--iter", "1", "--warmup", "0",
                       "--device", "cpu", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    results = json.loads((out / "results.json").read_text())["results"]
    assert [(r["index"], r["case"], r["from"]) for r in results] == [
        (0, "convbfp16 n1 c3 11x18 k4 3x3/2x2", "batches:2,3,4"),
        (1, "convbfp16 n2 c3 11x18 k4 3x3/2x2", "batches:5")]
    assert [len(r["lines"]) for r in results] == [3, 1]
    assert "-n 5 " in results[0]["lines"][1] and "-n 16 " in results[1]["lines"][0]
    assert "batches:2,3,4 scale to one shape, convbfp16 n1 c3 11x18 k4 3x3/2x2: timed once" \
        in printed
    table = printed[printed.index("case"):]
    assert table.count("convbfp16 n1 c3 11x18") == 2  # once per table: time and memory
    assert "| convbfp16 n1 c3 11x18 k4 3x3/2x2 | batches:2,3,4 | fwd |" in \
        (out / "report.md").read_text()


def test_distinct_shapes_keep_the_order_and_every_line():
    from bwdconv.bench.cli import distinct_shapes, sources_label

    lines = ["conv -n 1 -c 8 -H 16 -W 16 -k 8 -y 1 -x 1 -F 2",
             "conv -n 2 -c 8 -H 16 -W 16 -k 8 -y 1 -x 1 -F 2",
             "conv -n 16 -c 8 -H 16 -W 16 -k 8 -y 1 -x 1 -F 2",
             "conv -n 1 -c 8 -H 16 -W 16 -k 8 -y 1 -x 1 -F 4"]  # another direction: its own
    import dataclasses

    cases = [dataclasses.replace(parse_line(l), source=f"s:{i}") for i, l in enumerate(lines, 1)]
    shapes = distinct_shapes(cases, 8)
    assert [sources_label(group) for _, group in shapes] == ["s:1,2", "s:3", "s:4"]
    assert [scaled.batch for scaled, _ in shapes] == [1, 2, 1]
    assert [len(group) for _, group in distinct_shapes(cases, 1)] == [1, 1, 1, 1]
    assert sources_label([dataclasses.replace(cases[0], source="line 1"),
                          dataclasses.replace(cases[1], source="line 2")]) == "line 1; line 2"


def test_the_tuned_column_keeps_its_decisions_in_a_cache_of_its_own(tmp_path, monkeypatch,
                                                                    fresh_tuning, capsys):
    """By default the tuned column tunes into OUT/decisions, emptied at the
    start of each run, and leaves the user's cache as it was; the header
    says which cache. --tuning-cache user writes the user's, and a directory
    given is used as it is."""
    from bwdconv import _cache

    users = pathlib.Path(os.environ["BWDCONV_CACHE_DIR"])
    out = tmp_path / "out"
    own = out / "decisions" / _cache.FILE_NAME
    stale = out / "decisions" / "stale.txt"
    stale.parent.mkdir(parents=True)
    stale.write_text("from an earlier run")

    def bench(*options):
        assert bench_main([*options, "--iter", "1", "--warmup", "0", "--scale", "1", "--device",
                           "cpu", "--out", str(out), *ONE_LINE]) == 0
        return capsys.readouterr().out, json.loads((out / "results.json").read_text())

    printed, data = bench()
    assert not (users / _cache.FILE_NAME).exists()  # the user's cache untouched
    assert _cache.read_entries(own), "the tuned column's decisions are in the bench's cache"
    assert not stale.exists()
    assert os.environ["BWDCONV_CACHE_DIR"] == str(users)  # the variable is back
    assert f"tuned column's decisions cache: the bench's own, {own}" in printed
    assert data["meta"]["decisions_cache"].startswith(f"the bench's own, {own}")
    tuned = [r for r in data["results"] if r["strategy"] == "tuned"]
    assert tuned and tuned[0]["tuned"] != "-"

    given = tmp_path / "given"
    printed, data = bench("--tuning-cache", str(given))
    assert _cache.read_entries(given / _cache.FILE_NAME)
    assert not (users / _cache.FILE_NAME).exists()
    assert f"{given / _cache.FILE_NAME} (--tuning-cache" in data["meta"]["decisions_cache"]

    printed, data = bench("--tuning-cache", "user")
    assert _cache.read_entries(users / _cache.FILE_NAME)
    assert data["meta"]["decisions_cache"].startswith(
        f"the user's, {users / _cache.FILE_NAME} (--tuning-cache user)")


def test_the_per_call_cost_is_the_low_quantile_against_aten_called_alike():
    """The op's cost is measured against aten's convolution called the same
    way (the Python-to-dispatcher step cancels) plus the router's lookup;
    batches a preemption slowed do not move it."""
    from bwdconv import _overhead

    us = 1e-6
    quiet = {"pytorch": [40 * us] * 10, "pass_through": [42 * us] * 10,
             "aten_op": [49 * us] * 10, "op": [52 * us] * 10}
    assert _overhead.costs_from(quiet) == pytest.approx({"pass_through": 2 * us, "op": 5 * us})
    # Three batches of each side lost 30 to 400 us to other processes.
    loaded = {side: values[:7] + [values[0] + 30 * us, values[0] + 400 * us, values[0] + 90 * us]
              for side, values in quiet.items()}
    loaded["pytorch"] = loaded["pytorch"][::-1]
    assert _overhead.costs_from(loaded) == pytest.approx({"pass_through": 2 * us, "op": 5 * us})
    faster = dict(quiet, op=[47 * us] * 10, pass_through=[39 * us] * 10)
    assert _overhead.costs_from(faster) == {"pass_through": 0.0, "op": 0.0}
    assert _overhead.quantile([4, 1, 3, 2, 5], 0.25) == 2
    assert _overhead.quantile([1, 2], 0.5) == 1.5
    values = [3.0, 9.5, 1.25, 7.0, 4.0, 2.5]  # statistics.quantiles' inclusive quartiles
    assert [_overhead.quantile(values, q) for q in (0.25, 0.5, 0.75)] == \
        pytest.approx(statistics.quantiles(values, n=4, method="inclusive"))


def test_the_per_call_cost_is_measured_on_one_thread_and_puts_the_threads_back(monkeypatch):
    from bwdconv import _overhead

    monkeypatch.setattr(_overhead, "_measure", lambda: {})
    monkeypatch.setattr(torch, "get_num_threads", lambda: 3)  # as the caller had set it
    set_to = []
    monkeypatch.setattr(torch, "set_num_threads", set_to.append)
    _overhead._measured_here()
    assert set_to == [1, 3]


def test_the_header_gives_the_per_call_cost_the_columns_add(tmp_path, monkeypatch, capsys):
    from bwdconv import _overhead

    monkeypatch.setattr(_overhead, "call_costs", lambda: {"op": 4.3e-6, "pass_through": 1.5e-6})
    out = tmp_path / "out"
    assert bench_main(["--iter", "1", "--warmup", "0", "--scale", "1", "--device", "cpu",
                       "--out", str(out), *ONE_LINE]) == 0
    header = capsys.readouterr().out.splitlines()[2]
    assert header == ("per-call cost in the bwdconv and tuned columns: 4.3 us added where a "
                      "strategy is chosen (bwdconv's op), 1.5 us where aten is (the "
                      "pass-through)"), header
    meta = json.loads((out / "results.json").read_text())["meta"]
    assert meta["call_cost"].startswith("4.3 us added where a strategy is chosen")


def test_a_long_loop_writes_a_line_of_progress_where_stderr_is_no_terminal(monkeypatch):
    """In a log a loop shows its progress as whole lines, one per
    LINE_SECONDS at most and none before it has run that long (a postfix
    set by hand included), no carriage returns."""
    import time

    from bwdconv import _progress

    monkeypatch.setattr(_progress, "LINE_SECONDS", 0.2)
    log = io.StringIO()
    with progress_bar(total=4, desc="bench", unit="line", stream=log) as bar:
        for index in range(4):
            bar.set_postfix_str(f"case {index}")
            if index == 0:
                assert log.getvalue() == ""  # not before LINE_SECONDS
            time.sleep(0.25)
            bar.update()
    lines = log.getvalue().splitlines()
    assert "\r" not in log.getvalue() and log.getvalue().endswith("\n")
    assert 2 <= len(lines) <= 4, lines
    assert all(line.startswith("bench: ") for line in lines)
    assert lines[-1].split("|")[2].strip().startswith(("3/4", "4/4")), lines
