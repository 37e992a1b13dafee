"""The benchmark harness: MIOpenDriver parser, suites, and a tiny run end to end."""

import contextlib
import io
import json
import os
import pathlib
import random
import re
import sys

import pytest
import torch

import bwdconv

from bwdconv._progress import progress_bar
from bwdconv.bench import DriverLineError, parse_line, report, scale_case
from bwdconv.bench.cli import main as bench_main
from bwdconv.bench.driver import BACKWARD_DATA, BACKWARD_WEIGHT, FORWARD
from bwdconv.bench.kernels import is_kernel_of, kernel_bytes, kernels

SUITES = pathlib.Path(__file__).resolve().parents[1] / "benchmarks" / "suites"

SEED = ("convbfp16 -n 16 -c 16 -H 225 -W 225 -k 64 -y 3 -x 3 -p 1 -q 1 -u 1 -v 1 -l 1 -j 1 "
        "-m conv -g 1 -F 4 -t 1 --in_layout NHWC --out_layout NHWC --fil_layout NHWC --iter 100")


def test_seed_line_every_2d_flag():
    case = parse_line(SEED)
    assert case.dtype == torch.bfloat16
    assert (case.batch, case.in_channels, case.out_channels) == (16, 16, 64)
    assert case.input == (225, 225) and case.filter == (3, 3)
    assert case.padding == (1, 1) and case.stride == (1, 1) and case.dilation == (1, 1)
    assert case.groups == 1 and case.directions == BACKWARD_WEIGHT
    assert case.channels_last and case.filter_channels_last
    assert case.iterations == 100


def test_long_flags_equal_short_flags():
    short = parse_line("convfp16 -n 2 -c 8 -H 9 -W 10 -k 4 -y 3 -x 2 -p 1 -q 0 -u 2 -v 3 "
                       "-l 2 -j 1 -g 2 -F 6 -i 7")
    long = parse_line("convfp16 --batchsize 2 --in_channels 8 --in_h 9 --in_w 10 "
                      "--out_channels 4 --fil_h 3 --fil_w 2 --pad_h 1 --pad_w 0 "
                      "--conv_stride_h 2 --conv_stride_w 3 --dilation_h 2 --dilation_w 1 "
                      "--group_count 2 --forw 6 --iter 7")
    short.line = long.line = ""
    assert short == long
    assert short.dtype == torch.float16
    assert short.direction_list() == [BACKWARD_DATA, BACKWARD_WEIGHT]


def test_3d_flags():
    case = parse_line("conv -n 2 -c 4 --in_d 8 -H 9 -W 10 -k 8 --fil_d 3 -y 1 -x 2 --pad_d 1 "
                      "-p 0 -q 1 --conv_stride_d 2 -u 1 -v 3 --dilation_d 2 -l 1 -j 1 "
                      "--spatial_dim 3 -F 2 --in_layout NDHWC --out_layout NDHWC")
    assert case.dtype == torch.float32 and case.spatial_dims == 3
    assert case.input == (8, 9, 10) and case.filter == (3, 1, 2)
    assert case.padding == (1, 0, 1) and case.stride == (2, 1, 3) and case.dilation == (2, 1, 1)
    assert case.channels_last


def test_3d_short_flags_and_comments():
    """MIOpenDriver's short 3D flags are punctuation; `#` starts a comment only
    where it begins a word."""
    case = parse_line("conv -n 1 -c 4 -H 8 -W 8 -k 4 -y 3 -x 3 --spatial_dim 3 -! 6 -@ 3 "
                      "-# 2 -$ 1 -^ 2 -F 4  # a comment -u 9")
    assert case.input == (6, 8, 8) and case.filter == (3, 3, 3)
    assert case.stride == (2, 1, 1) and case.padding == (1, 0, 0) and case.dilation == (2, 1, 1)
    assert case.directions == BACKWARD_WEIGHT
    assert parse_line("conv -n 1 -c 2 #-c 9").in_channels == 2


def test_every_miopen_driver_short_flag_is_accepted():
    flags = ("-I NCHW -O NCHW -f NCHW -F 0 -n 1 -c 2 -H 5 -W 5 -k 2 -y 3 -x 3 -u 1 -v 1 "
             "-p 0 -q 0 -r 0 -Y 0 -X 0 -i 3 -V 0 -C dir -t 1 -w 0 -s 0 -P 0 -o 0 -d x -e w "
             "-b 0 -m conv -z default -Z 0 -L 1 -l 1 -j 1 -a b -g 1 -D dy -S -1")
    assert parse_line("conv " + flags).input == (5, 5)
    three = parse_line("conv --spatial_dim 3 -! 4 -@ 1 -# 1 -$ 0 -^ 1 -% 0 -n 1 -c 2 -k 2")
    assert three.input == (4, 32, 32) and three.filter == (1, 3, 3)


@pytest.mark.parametrize("line, padding", [
    ("conv -n 1 -c 2 -H 7 -W 8 -k 2 -y 3 -x 5 -p 4 -q 4 -z default", (4, 4)),
    ("conv -n 1 -c 2 -H 7 -W 8 -k 2 -y 3 -x 5 -p 4 -q 4 -z valid", (0, 0)),
    # same: half of max(k - s, 0) when s divides the size, else of max(k - size % s, 0)
    ("conv -n 1 -c 2 -H 7 -W 8 -k 2 -y 3 -x 5 -u 2 -v 2 -z same", (1, 1)),
    ("conv -n 1 -c 2 -H 7 -W 8 -k 2 -y 3 -x 5 -l 2 -j 2 -p 1 -q 1 -z same", (1, 1)),
])
def test_pad_mode_sets_padding_as_miopen_driver_does(line, padding):
    assert parse_line(line).padding == padding


def test_forw_zero_means_every_direction():
    case = parse_line("conv -n 1 -c 2 -H 5 -W 5 -k 2 -y 3 -x 3 -F 0")
    assert case.direction_list() == [FORWARD, BACKWARD_DATA, BACKWARD_WEIGHT]


@pytest.mark.parametrize("line", [
    "conv -n 2 -c 4 -H 9 -W 9 -k 8 -y 3 -x 3 -u 2 -v 2 -g 2 -F 6",
    "convbfp16 -n 1 -c 3 --in_d 4 -H 5 -W 6 -k 2 --fil_d 2 -y 1 -x 3 --spatial_dim 3 -F 2 "
    "--in_layout NDHWC --out_layout NDHWC",
    "conv -m trans -n 1 -c 8 -H 5 -W 5 -k 4 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 -Y 1 -X 1 -F 5",
    "convbfp16 -m trans -n 1 -c 4 --in_d 3 -H 5 -W 6 -k 2 --fil_d 2 -y 2 -x 2 --conv_stride_d 2 "
    "-u 2 -v 3 --trans_output_pad_d 1 -X 2 --spatial_dim 3 -F 1",
])
def test_to_line_round_trips(line):
    case = parse_line(line)
    again = parse_line(case.to_line())
    case.line = again.line = ""
    assert again == case


@pytest.mark.parametrize("line, message", [
    ("conv -n 2 -G 3", "unknown flag '-G'"),
    ("conv -n 2 -c 3 -z full", "--pad_mode must be default, same or valid"),
    ("conv -n 2 --frobnicate 3", "unknown flag '--frobnicate'"),
    ("convint8 -n 2", "unknown command 'convint8'"),
    ("conv -n 2 -c", "flag '-c' has no value"),
    ("conv -n two", "flag -n (--batchsize) needs an integer, got 'two'"),
    ("conv -n 2 -n 3", "given twice"),
    ("conv -n 1 -c 2 --in_d 4 -H 5 -W 5", "--in_d needs --spatial_dim 3"),
    ("conv -n 1 -c 2 -H 5 -W 5 --in_layout NCWH", "unsupported layout 'NCWH'"),
    ("conv -n 1 -c 2 -H 5 -W 5 -m deconv", "mode 'deconv' is not supported"),
    ("conv -n 1 -c 2 -H 5 -W 5 -u 2 -v 2 -Y 1", "output padding (-Y/-X) needs -m trans"),
    ("conv -m trans -n 1 -c 2 -H 5 -W 5 -u 2 -v 2 -X 2", "output padding 2 must be smaller"),
    ("conv -m trans -n 1 -c 2 -H 1 -W 5 -y 3 -x 3 -p 2 -q 1", "output [-1, 5] is empty"),
    ("conv -n 1 -c 4 -H 5 -W 5 -k 6 -g 4", "-g 4 must divide -c 4 and -k 6"),
    ("conv -n 1 -c 2 -H 2 -W 5 -k 2 -y 3 -x 3", "smaller than the dilated filter"),
    ("conv -n 1 -c 2 -H 5 -W 5 -u 0", "strides must be positive"),
    ("conv -n 1 -c 2 -H 5 -W 5 -F 9", "-F must be 0-7"),
    ("conv -n 1 -c 2 -H 5 -W 5 --spatial_dim 1", "--spatial_dim must be 2 or 3"),
    ("", "empty line"),
])
def test_bad_lines_name_the_problem(line, message):
    with pytest.raises(DriverLineError) as error:
        parse_line(line)
    assert message in str(error.value)


def test_scale_keeps_groups_and_a_valid_shape():
    case = parse_line("convfp16 -n 32 -c 256 -H 200 -W 200 -k 256 -y 3 -x 3 -p 1 -q 1 "
                      "-u 2 -v 2 -g 32 -F 2")
    small = scale_case(case, 8)
    assert (small.batch, small.input) == (4, (25, 25))
    assert small.in_channels % 32 == 0 and small.out_channels % 32 == 0
    tiny = scale_case(parse_line("conv -n 1 -c 3 -H 7 -W 7 -k 4 -y 7 -x 7 -F 4"), 8)
    assert tiny.input == (7, 7) and tiny.batch == 1


def test_transposed_line_reads_as_miopen_driver_does():
    case = parse_line("conv -m trans -n 2 -c 8 -H 5 -W 6 -k 4 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 "
                      "-Y 1 -X 0 -g 2 -F 1")
    assert case.transposed and case.output_padding == (1, 0)
    assert case.input_size() == [2, 8, 5, 6] and case.weight_size() == [8, 2, 3, 3]
    expected = torch.nn.functional.conv_transpose2d(
        torch.zeros(case.input_size()), torch.zeros(case.weight_size()), stride=2, padding=1,
        output_padding=(1, 0), groups=2)
    assert case.transposed_output() == tuple(expected.shape[2:])
    assert "trans" in case.label()


@pytest.mark.parametrize("suite", ["seeds", "resnet50", "r3d18", "transposed"])
def test_suites_parse(suite):
    lines = [l for l in (SUITES / f"{suite}.txt").read_text().splitlines()
             if l.strip() and not l.startswith("#")]
    cases = [parse_line(l) for l in lines]
    assert len(cases) >= 10
    assert len({c.to_line() for c in cases}) == len(cases), "a suite lists a conv twice"


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
    assert kernel_bytes("swap1x1", "fused", plan, case, 4) == 4 * (2 * 3 * 64 + 2 * 3 * 16)
    # in_place: the GEMM filled the 4x4 slots; the pass only zeroes the other 48 of 64.
    assert kernel_bytes("swap1x1", "in_place", plan, case, 4) == 4 * (2 * 3 * 48)
    assert kernel_bytes("scatter", None, plan, case, 2) == 2 * (2 * 5 * 64 + 2 * 5 * 16)
    # relayout: grad_output (2x5x4x4) there and dx (2x3x8x8) back, each read and
    # written once; the 1x1 weight is channels_last as it is.
    assert kernel_bytes("relayout", None, plan, case, 2) == 2 * 2 * (2 * 5 * 16 + 2 * 3 * 64)
    case3 = parse_line("conv -n 2 -c 3 -k 5 -H 8 -W 8 -y 3 -x 3 -u 2 -v 2 -p 1 -q 1")
    plan3 = bwdconv.explain(case3.input_size(), case3.weight_size(), 2, 1).to_dict()
    assert kernel_bytes("relayout", None, plan3, case3, 4) == \
        4 * 2 * (2 * 5 * 16 + 2 * 3 * 64 + 5 * 3 * 9)


def test_the_kernel_benchmark_times_every_walk_of_a_strategys_kernel_and_nothing_else():
    """Each __global__ kernel of a strategy's .cu file (its row, dense and
    staged walks), as the profiler names it, counts for that strategy; torch's
    own kernels of a similar name and the other family's do not."""
    walks = {"scatter": 3, "interleave": 3, "relayout": 1}  # __global__ kernels per file
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


def test_traffic_records_every_kernel_writing_its_output_once(tmp_path, capsys):
    """python -m bwdconv.bench.traffic on two tiny suite lines: a row per kernel
    of every strategy that launches one, each writing its output exactly once
    (stored bytes equal the minimum, nothing stored twice)."""
    from bwdconv.bench.traffic import main as traffic_main

    suite = tmp_path / "tiny.txt"
    suite.write_text("conv -n 2 -c 4 -H 9 -W 10 -k 6 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 -F 6\n"
                     "conv -n 2 -c 4 -H 8 -W 8 -k 6 -y 1 -x 1 -u 2 -v 2 -F 2\n")
    traffic_main(["--suite", str(suite), "--scale", "1"])
    rows = [line.split(" | ") for line in capsys.readouterr().out.splitlines()
            if line.startswith("| conv ")]
    kernels = {(row[1].split("[")[0], row[2]) for row in rows}
    expected = {(e.name, e.kernel) for e in bwdconv.registry() if e.kernel and e.name != "splitk"}
    assert expected <= kernels
    assert ("splitk", "splitk_reduce") in kernels
    for row in rows:
        assert row[6] == "1.00" and row[7] == "0", row


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


def test_traffic_reads_a_transposed_line_and_every_swap1x1_writer(tmp_path, capsys):
    """bwdconv.bench.traffic on a transposed float16 kernel = stride line: its
    forward as the matching input gradient, with a row for the epilogue
    writer's tap_gemm (timed nowhere on the CPU, measured here), which
    writes dx once."""
    from bwdconv.bench.traffic import main as traffic_main

    suite = tmp_path / "transposed.txt"
    suite.write_text("convfp16 -m trans -n 2 -c 8 -H 6 -W 8 -k 8 -y 2 -x 2 -u 2 -v 2 -F 5\n")
    traffic_main(["--suite", str(suite), "--scale", "1"])
    rows = [line.split(" | ") for line in capsys.readouterr().out.splitlines()
            if line.startswith("| convfp16 ")]
    assert all(row[0].endswith("trans") for row in rows)
    kernels = {(row[1], row[2]): row for row in rows}
    assert {("swap1x1[epilogue]", "tap_gemm"), ("splitk", "splitk_reduce")} <= set(kernels)
    assert any(strategy == "swap1x1[fused]" for strategy, _ in kernels)
    epilogue = kernels[("swap1x1[epilogue]", "tap_gemm")]
    assert epilogue[6] == "1.00" and epilogue[7] == "0", epilogue


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
            assert sum(bwdconv.served()["input"].values()) == served, (fn, name)


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
    assert _overhead.low_quantile([4, 1, 3, 2, 5], 0.25) == 2
    assert _overhead.low_quantile([1, 2], 0.5) == 1.5


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


@pytest.mark.parametrize("name", ["swap1x1", "swap1x1_float32", "phase", "splitk",
                                  "phase_transposed"])
def test_random_step_classes_mostly_draw_shapes_the_cpu_rules_plan_their_strategy(name):
    """bench.random_steps: a class's raw draws (before it redraws the ones the
    rules plan otherwise) must mostly be shapes the rules give the class's
    strategy, or the class no longer follows the rules it is named after."""
    import random

    from bwdconv.bench import random_steps

    make, (gradient, strategy) = random_steps.CLASSES[name]
    draw, hits, valid = random.Random(3), 0, 0
    while valid < 40:
        case = {"channels_last": False, "transposed": False, "groups": 1, **make(draw)}
        case.setdefault("p", [0] * case["dims"])
        case.setdefault("d", [1] * case["dims"])
        if min(random_steps._output_sizes(case)) < 1:
            continue
        valid += 1
        flops = random_steps._flops(case)
        in_range = case.get("min_flops", 1 << 18) <= flops <= case.get("max_flops", 1 << 29)
        hits += in_range and random_steps.planned(case, torch.device("cpu"))[gradient] == strategy
    assert hits >= valid // 2, f"{hits} of {valid}"


def test_random_steps_time_each_case_in_every_mode_and_name_what_served(tmp_path, capsys):
    from bwdconv.bench import random_steps

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
