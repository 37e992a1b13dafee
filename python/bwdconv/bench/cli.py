"""Command line of the benchmark harness.

Harness options come first; then MIOpenDriver lines, each starting with its
command word (conv, convfp16, convbfp16), or suites with --suite.
"""

import argparse
import contextlib
import dataclasses
import os
import pathlib
import shlex
import shutil
import sys
import tempfile

import torch

from bwdconv import _cache, _overhead
from bwdconv._library import _C
from bwdconv._progress import progress_bar

from . import device as dev
from . import report
from .driver import DTYPES, DriverLineError, parse_line, scale_case, with_dtype, with_layout
from .run import run_case

# The suites ship with the package, so they are found from anywhere.
SUITES = pathlib.Path(__file__).resolve().parent / "suites"


def known_suites():
    return sorted(p.stem for p in SUITES.glob("*.txt"))


def suite_path(name):
    candidate = pathlib.Path(name)
    if candidate.suffix and candidate.exists():
        return candidate
    path = SUITES / f"{name}.txt"
    if path.exists():
        return path
    raise SystemExit(f"unknown suite {name!r}; known suites: {', '.join(known_suites())}")


def read_line(line, source, where):
    """The case of a MIOpenDriver line, marked with its `source`; a line it
    cannot read ends the run with `where` and the problem."""
    try:
        return dataclasses.replace(parse_line(line), source=source)
    except DriverLineError as error:
        raise SystemExit(f"{where}: {error}") from None


def read_suite(path):
    return [read_line(line, f"{path.stem}:{number}", f"{path}:{number}")
            for number, line in enumerate(path.read_text().splitlines(), 1)
            if line.strip() and not line.lstrip().startswith("#")]


def split_lines(argv):
    """Harness options, then one token list per MIOpenDriver line."""
    starts = [i for i, token in enumerate(argv) if token in DTYPES]
    if not starts:
        return argv, []
    options = argv[: starts[0]]
    lines = [argv[a:b] for a, b in zip(starts, starts[1:] + [len(argv)])]
    return options, lines


def add_suite_option(p):
    p.add_argument("--suite", action="append", default=[],
                   help=f"a suite shipped with bwdconv ({', '.join(known_suites())}) or a file of "
                        "MIOpenDriver lines")


def add_layout_option(p):
    p.add_argument("--layout", choices=["channels_first", "channels_last"], default=None,
                   help="put every case's input and grad_output in this layout "
                        "(default: each line's --in_layout/--out_layout)")


DTYPE_NAMES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def add_dtype_option(p):
    p.add_argument("--dtype", choices=sorted(DTYPE_NAMES), default=None,
                   help="run every case in this dtype (default: each line's command word)")


def cases_from(args, line_tokens=(), dtype=None):
    """The cases of the lines and suites given, in the layout asked and in
    `dtype` (None: each line's own)."""
    cases = [read_line(shlex.join(tokens), f"line {number}",
                       f"bad MIOpenDriver line {shlex.join(tokens)!r}")
             for number, tokens in enumerate(line_tokens, 1)]
    for name in args.suite:
        cases += read_suite(suite_path(name))
    return [with_dtype(with_layout(case, args.layout), dtype) for case in cases]


def parser():
    p = argparse.ArgumentParser(
        prog="python -m bwdconv.bench",
        description="Times aten, each bwdconv strategy and the planner's choice on "
                    "MIOpenDriver lines. Harness options first, then the lines.")
    add_suite_option(p)
    p.add_argument("--scale", type=int, default=None,
                   help="shrink batch, channels and spatial size by this factor "
                        "(default: 1 on a GPU, 8 on the CPU)")
    p.add_argument("--iter", type=int, default=None,
                   help="timed iterations per call (default: 50 on a GPU, 10 on the CPU; "
                        "a line's own --iter wins)")
    p.add_argument("--warmup", type=int, default=None, help="untimed calls first (default 10 / 2)")
    add_layout_option(p)
    add_dtype_option(p)
    p.add_argument("--check", action="store_true",
                   help="compare every result with a float64 reference; a wrong result gets no time")
    dev.add_device_option(p)
    p.add_argument("--out", default="benchmarks/out", help="directory for JSON, CSV, markdown, PNG")
    p.add_argument("--cudnn-benchmark", choices=["on", "off"], default=None,
                   help="torch.backends.cudnn.benchmark for the run, for aten and bwdconv alike "
                        "(default: the process's setting, off unless the caller set it)")
    add_tuning_cache_option(p, "OUT/decisions, emptied at the start of the run")
    return p


def add_tuning_cache_option(p, default):
    p.add_argument("--tuning-cache", default=None, metavar="DIR|user",
                   help="the decisions cache of the tuned side: a directory (its decisions "
                        "are reused), or 'user' for the user's own ($BWDCONV_CACHE_DIR or "
                        f"~/.cache/bwdconv). Default: {default}, so that the bench tunes "
                        "afresh and never changes what a user's training runs")


@contextlib.contextmanager
def cudnn_benchmark(setting):
    """torch.backends.cudnn.benchmark set to `setting` ('on', 'off'; None:
    left as it is) for the body; yields the header's words for it."""
    with dev.backend_flags(cudnn_benchmark=None if setting is None else setting == "on"):
        state = "on" if torch.backends.cudnn.benchmark else "off"
        how = f"set by --cudnn-benchmark {setting}" if setting is not None else \
            "the process's setting; --cudnn-benchmark on|off sets it"
        yield f"{state} ({how})"


@contextlib.contextmanager
def tuning_cache(choice, out):
    """BWDCONV_CACHE_DIR pointed at the tuned column's decisions cache for the
    body (the bench's own, under `out`, or a temporary directory where `out`
    is None, unless `choice` names one); yields the header's words for it.
    Decisions this process holds in memory are forgotten on the way in and
    out, so that neither cache's leak into the other's calls."""
    if choice == "user":
        yield f"the user's, {_cache.path()} (--tuning-cache user)"
        return
    temporary = None
    if choice is None and out is None:
        temporary = tempfile.mkdtemp(prefix="bwdconv-bench-decisions-")
        directory = pathlib.Path(temporary)
        words = "the bench's own, in a temporary directory removed after the run"
    elif choice is None:
        directory = pathlib.Path(out) / "decisions"
        shutil.rmtree(directory, ignore_errors=True)
        words = f"the bench's own, {directory / _cache.FILE_NAME} (emptied at the start of the run)"
    else:
        directory = pathlib.Path(choice)
        words = f"{directory / _cache.FILE_NAME} (--tuning-cache; its decisions reused)"
    directory.mkdir(parents=True, exist_ok=True)
    previous = os.environ.get("BWDCONV_CACHE_DIR")
    os.environ["BWDCONV_CACHE_DIR"] = str(directory)
    _C.forget_decisions()
    try:
        yield words
    finally:
        if previous is None:
            os.environ.pop("BWDCONV_CACHE_DIR", None)
        else:
            os.environ["BWDCONV_CACHE_DIR"] = previous
        _C.forget_decisions()
        if temporary is not None:
            shutil.rmtree(temporary, ignore_errors=True)


def distinct_shapes(cases, scale):
    """[(scaled case, [the cases it stands for])] in the order first seen:
    lines that scale into the same convolution (at 1/8, seed lines that
    differ in a batch below 8) are timed once, as one row naming them all."""
    shapes = {}
    for case in cases:
        scaled = scale_case(case, scale)
        key = (scaled.to_line(), scaled.iterations)
        shapes.setdefault(key, (scaled, []))[1].append(case)
    return list(shapes.values())


def sources_label(cases):
    """'seeds:8,9,10' for the cases of one row (their suites and line numbers)."""
    parts = {}
    for case in cases:
        where, _, number = case.source.rpartition(":") if ":" in case.source \
            else (case.source, "", "")
        parts.setdefault(where, []).append(number)
    return "; ".join(f"{where}:{','.join(numbers)}" if any(numbers) else where
                     for where, numbers in parts.items())


def call_cost_words(costs):
    """The header's words for the per-call cost added to the bwdconv and tuned columns."""
    return (f"{costs['op'] * 1e6:.1f} us added where a strategy is chosen (bwdconv's op), "
            f"{costs['pass_through'] * 1e6:.1f} us where aten is (the pass-through)")


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    option_tokens, line_tokens = split_lines(argv)
    args = parser().parse_args(option_tokens)
    device = torch.device(args.device)
    gpu = device.type == "cuda"
    scale = args.scale if args.scale is not None else (1 if gpu else 8)
    iterations = args.iter or (50 if gpu else 10)
    warmup = args.warmup if args.warmup is not None else (10 if gpu else 2)

    cases = cases_from(args, line_tokens, DTYPE_NAMES.get(args.dtype))
    if not cases:
        parser().error("give MIOpenDriver lines or --suite")
    shapes = distinct_shapes(cases, scale)

    with cudnn_benchmark(args.cudnn_benchmark) as cudnn, \
            tuning_cache(args.tuning_cache, args.out) as decisions:
        meta = dev.describe(device)
        meta["scale"] = scale
        meta["warmup"] = warmup
        copy_gbps = dev.copy_bandwidth_gbps(device)
        meta["copy_bandwidth_gbps"] = round(copy_gbps, 1)
        peaks = dev.device_peaks(meta["device"]) if gpu else None
        meta["peaks"] = peaks or "none known; roofline uses the measured copy bandwidth"
        meta["cudnn_benchmark"] = cudnn
        meta["decisions_cache"] = decisions
        # Measured before any case runs, as a user's process pays it (bwdconv._overhead).
        meta["call_cost"] = call_cost_words(_overhead.call_costs())
        print(dev.header(meta, f"scale 1/{scale}",
                         f"{iterations} iterations after {warmup} warm-up",
                         f"copy bandwidth {copy_gbps:.1f} GB/s") +
              f"\ncudnn.benchmark {cudnn}\n"
              f"per-call cost in the bwdconv and tuned columns: {meta['call_cost']}\n"
              f"tuned column's decisions cache: {decisions}", flush=True)
        merged = [(scaled, group) for scaled, group in shapes if len(group) > 1]
        if merged:
            meta["timed_once"] = {sources_label(group): scaled.label() for scaled, group in merged}
            for scaled, group in merged:
                print(f"{sources_label(group)} scale to one shape, {scaled.label()}: timed once")

        rows = []
        with progress_bar(total=len(shapes), desc="bench", unit="line") as bar:
            for index, (scaled, group) in enumerate(shapes):
                bar.set_postfix_str(scaled.label())
                case_rows = run_case(index, scaled, device, warmup,
                                     scaled.iterations or iterations, args.check, peaks,
                                     copy_gbps)
                for row in case_rows:
                    row["from"] = sources_label(group)
                    row["lines"] = [case.line or case.to_line() for case in group]
                rows += case_rows
                bar.update()
    print(report.table(rows))
    out = report.write_all(args.out, meta, rows)
    written = ["results.json", "results.csv", "report.md"]
    if (out / "speedup.png").exists():
        written.append("speedup.png")
    else:
        written.append("no plot (matplotlib is not installed)")
    print(f"wrote {out}/" + ", ".join(written))
    return 0
