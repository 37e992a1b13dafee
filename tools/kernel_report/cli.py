"""The command line (scripts/kernel_report.py): read the kernels the CMake build
compiled, write report.md and kernels.json (or print the report), and exit 1
where --check finds a rule broken."""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from . import ROOT
from . import __doc__ as overview
from .builds import MissingBuild, Tools, collect
from .devices import DEVICES
from .gates import violations
from .occupancy import occupancy_rows
from .report import markdown, write_report


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=overview.split("\n\n")[0])
    parser.add_argument("--build", type=Path, default=ROOT / "build" / "cmake",
                        help="the CMake build directory whose kernels are read (default build/cmake)")
    parser.add_argument("--out", type=Path, help="write report.md and kernels.json here")
    parser.add_argument("--check", action="store_true", help="exit 1 when a rule is broken")
    return parser.parse_args()


def lacks_builds(tools: Tools, checking: bool) -> bool:
    """Says which vendors' kernels the build lacks (and whether cuobjdump is
    missing); True where --check cannot run without them."""
    missing = [f"{vendor} kernels ({option}=ON)" for vendor, option, compiler in
               (("nvcc", "BWDCONV_CUDA", tools.nvcc), ("hipcc", "BWDCONV_HIP", tools.hipcc))
               if not compiler]
    if not tools.cuobjdump:
        missing.append("cuobjdump (pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm)")
    if missing:
        print("kernel_report: not found: " + ", ".join(missing), file=sys.stderr)
    return checking and (not tools.nvcc or not tools.hipcc)


def command_line() -> str:
    """The command as run, paths under the repository relative to it."""
    command = "python3 scripts/kernel_report.py " + " ".join(
        a if not a.startswith("/") else os.path.relpath(a, ROOT) for a in sys.argv[1:])
    return command.strip()


def main() -> int:
    args = parse_args()
    tools = Tools.discover(args.build)
    if lacks_builds(tools, bool(args.check)):
        return 1
    try:
        kernels = collect(tools, args.build)
    except MissingBuild as missing:
        print(f"kernel_report: {missing}", file=sys.stderr)
        return 1
    occupancy = occupancy_rows(kernels)
    problems = violations(kernels)
    report = markdown(kernels, occupancy, problems, tools, command_line())
    write_report(args.out, report, "kernels.json",
                 {"kernels": kernels, "occupancy": occupancy,
                  "violations": problems, "devices": DEVICES})
    for p in problems:
        print("kernel_report: " + p, file=sys.stderr)
    if args.check and problems:
        print(f"kernel_report: {len(problems)} violation(s) of the rules", file=sys.stderr)
        return 1
    return 0
