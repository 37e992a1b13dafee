"""Command line of the benchmark harness.

Harness options come first; then MIOpenDriver lines, each starting with its
command word (conv, convfp16, convbfp16), or suites with --suite.
"""

import argparse
import pathlib
import shlex
import sys

import torch

from bwdconv._progress import progress_bar

from . import device as dev
from . import report
from .driver import DTYPES, DriverLineError, parse_line, scale_case, with_dtype, with_layout
from .run import run_case

SUITE_DIRS = [
    pathlib.Path(__file__).resolve().parents[3] / "benchmarks" / "suites",  # source checkout
    pathlib.Path.cwd() / "benchmarks" / "suites",
]


def suite_path(name):
    candidate = pathlib.Path(name)
    if candidate.suffix and candidate.exists():
        return candidate
    for directory in SUITE_DIRS:
        path = directory / f"{name}.txt"
        if path.exists():
            return path
    known = sorted({p.stem for d in SUITE_DIRS if d.exists() for p in d.glob("*.txt")})
    raise SystemExit(f"unknown suite {name!r}; known suites: {', '.join(known) or 'none found'}")


def read_suite(path):
    cases = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            cases.append(parse_line(line))
        except DriverLineError as error:
            raise SystemExit(f"{path}:{number}: {error}") from None
    return cases


def split_lines(argv):
    """Harness options, then one token list per MIOpenDriver line."""
    starts = [i for i, token in enumerate(argv) if token in DTYPES]
    if not starts:
        return argv, []
    options = argv[: starts[0]]
    lines = [argv[a:b] for a, b in zip(starts, starts[1:] + [len(argv)])]
    return options, lines


def add_layout_option(p):
    p.add_argument("--layout", choices=["channels_first", "channels_last"], default=None,
                   help="put every case's input and grad_output in this layout "
                        "(default: each line's --in_layout/--out_layout)")


DTYPE_NAMES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def cases_from(args, line_tokens=(), dtype=None):
    """The cases of the lines and suites given, in the layout asked and in
    `dtype` (None: each line's own)."""
    cases = []
    for tokens in line_tokens:
        try:
            cases.append(parse_line(shlex.join(tokens)))
        except DriverLineError as error:
            raise SystemExit(f"bad MIOpenDriver line {shlex.join(tokens)!r}: {error}") from None
    for name in args.suite:
        cases += read_suite(suite_path(name))
    return [with_dtype(with_layout(case, args.layout), dtype) for case in cases]


def parser():
    p = argparse.ArgumentParser(
        prog="python -m bwdconv.bench",
        description="Times aten, each bwdconv strategy and the planner's choice on "
                    "MIOpenDriver lines. Harness options first, then the lines.")
    p.add_argument("--suite", action="append", default=[],
                   help="suite name under benchmarks/suites (seeds, resnet50, r3d18) or a file")
    p.add_argument("--scale", type=int, default=None,
                   help="shrink batch, channels and spatial size by this factor "
                        "(default: 1 on a GPU, 8 on the CPU)")
    p.add_argument("--iter", type=int, default=None,
                   help="timed iterations per call (default: 50 on a GPU, 10 on the CPU; "
                        "a line's own --iter wins)")
    p.add_argument("--warmup", type=int, default=None, help="untimed calls first (default 10 / 2)")
    add_layout_option(p)
    p.add_argument("--dtype", choices=sorted(DTYPE_NAMES), default=None,
                   help="run every case in this dtype (default: each line's command word)")
    p.add_argument("--check", action="store_true",
                   help="compare every result with a float64 reference; a wrong result gets no time")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--out", default="benchmarks/out", help="directory for JSON, CSV, markdown, PNG")
    return p


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

    meta = dev.describe(device)
    meta["scale"] = scale
    meta["warmup"] = warmup
    copy_gbps = dev.copy_bandwidth_gbps(device)
    meta["copy_bandwidth_gbps"] = round(copy_gbps, 1)
    peaks = dev.device_peaks(meta["device"]) if gpu else None
    meta["peaks"] = peaks or "none known; roofline uses the measured copy bandwidth"
    print(f"{meta['device']} | torch {meta['torch']} | scale 1/{scale} | {iterations} iterations "
          f"after {warmup} warm-up | copy bandwidth {copy_gbps:.1f} GB/s", flush=True)

    rows = []
    with progress_bar(total=len(cases), desc="bench", unit="line") as bar:
        for index, case in enumerate(cases):
            scaled = scale_case(case, scale)
            bar.set_postfix_str(scaled.label())
            rows += run_case(index, scaled, device, warmup, case.iterations or iterations,
                             args.check, peaks, copy_gbps)
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
