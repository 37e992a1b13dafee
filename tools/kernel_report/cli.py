"""The command line (scripts/kernel_report.py): compile and read the kernels,
write report.md and kernels.json (or print the report), and exit 1 where
--check finds a rule broken."""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

from . import ROOT
from . import __doc__ as overview
from .cache import CompileCache
from .compilers import Tools, collect
from .devices import DEVICES
from .gates import ROLES, violations
from .occupancy import occupancy_rows
from .report import markdown, write_report
from .splitk import splitk_products_source


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=overview.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="write report.md and kernels.json here")
    parser.add_argument("--check", nargs="?", const="all", choices=("all",) + ROLES,
                        help="exit 1 when a rule is broken (by the kernels of one role, or all)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--keep", type=Path, help="keep cubins, SASS and assembly here")
    parser.add_argument("--cache", type=Path,
                        help="reuse compiler outputs stored here for unchanged kernels; after a run "
                             "with every compiler, remove the entries it did not use (cache.py)")
    return parser.parse_args()


def lacks_compilers(tools: Tools, checking: bool) -> bool:
    """Says which tools are missing; True where --check cannot run without them."""
    missing = [n for n, v in (("nvcc", tools.nvcc), ("cuobjdump", tools.cuobjdump),
                              ("hipcc", tools.hipcc)) if not v]
    if missing:
        print("kernel_report: not found: " + ", ".join(missing) +
              " (cuobjdump: pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm)", file=sys.stderr)
    return checking and (not tools.nvcc or not tools.hipcc)


def command_line() -> str:
    """The command as run, paths under the repository relative to it."""
    command = "python3 scripts/kernel_report.py " + " ".join(
        a if not a.startswith("/") else os.path.relpath(a, ROOT) for a in sys.argv[1:])
    return command.strip()


def checked(kernels: list[dict], check: str) -> int:
    """The exit status of --check: 1 where a rule is broken by the kernels of the role checked."""
    broken = violations(kernels, ROLES if check == "all" else (check,))
    if broken:
        print(f"kernel_report: {len(broken)} violation(s) of the rules checked ({check})",
              file=sys.stderr)
    return 1 if broken else 0


def prune_cache(cache: CompileCache) -> None:
    """Removes the cache's entries this run did not use and says how many.
    Only after a run with every compiler: one without nvcc or hipcc used none
    of that compiler's entries, which are still good."""
    removed = cache.prune()
    if removed:
        size = sum(f.stat().st_size for f in cache.directory.rglob("*") if f.is_file())
        print(f"kernel_report: cache: removed {len(removed)} entries this run did not use, "
              f"kept {len(cache.used)}; {cache.directory} holds {size / 2**20:.0f} MiB",
              file=sys.stderr)


def main() -> int:
    args = parse_args()
    tools = Tools.discover()
    if lacks_compilers(tools, bool(args.check)):
        return 1
    work_dir = args.keep or Path(tempfile.mkdtemp(prefix="kernel_report."))
    work_dir.mkdir(parents=True, exist_ok=True)
    cache = CompileCache(args.cache) if args.cache else None
    kernels = collect(tools, work_dir, args.jobs, cache)
    if cache is not None and tools.nvcc and tools.cuobjdump and tools.hipcc:
        prune_cache(cache)
    if not args.keep:
        shutil.rmtree(work_dir, ignore_errors=True)
    splitk = splitk_products_source()
    occupancy = occupancy_rows(kernels)
    problems = violations(kernels)
    report = markdown(kernels, occupancy, problems, tools, command_line(), splitk)
    write_report(args.out, report, "kernels.json",
                 {"kernels": kernels, "occupancy": occupancy, "splitk": splitk,
                  "violations": problems, "devices": DEVICES})
    for p in problems:
        print("kernel_report: " + p, file=sys.stderr)
    return checked(kernels, args.check) if args.check else 0
