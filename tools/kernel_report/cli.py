"""The command line (scripts/kernel_report.py): compile, read and model the
kernels, write report.md and kernels.json (or print the report), and exit 1
where --check finds a rule broken; or splitk's part alone (--splitk-only,
splitk.json)."""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from . import ROOT
from . import __doc__ as overview
from .compilers import Tools, collect
from .devices import DEVICES
from .gates import ROLES, violations
from .occupancy import occupancy_rows
from .report import markdown, splitk_markdown
from .splitk import splitk_model, splitk_products_source
from .walks import model


def splitk_only(out: Path | None) -> int:
    with tempfile.TemporaryDirectory(prefix="kernel_report.") as work:
        splitk = {"source": splitk_products_source(), "model": splitk_model(Path(work))}
    report = "\n".join(["# splitk: static evidence (GPU figures modelled)", "",
                         "Command: `python3 scripts/kernel_report.py --splitk-only"
                         + (f" --out {os.path.relpath(out, ROOT)}`" if out else "`"), ""]
                        + splitk_markdown(splitk)) + "\n"
    if out:
        out.mkdir(parents=True, exist_ok=True)
        (out / "report.md").write_text(report)
        (out / "splitk.json").write_text(json.dumps(
            {"splitk": splitk, "devices": DEVICES}, indent=1, default=str) + "\n")
    else:
        print(report)
    return 0 if splitk["source"]["vendor_gemm"] else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=overview.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="write report.md and kernels.json here")
    parser.add_argument("--check", nargs="?", const="all", choices=("all",) + ROLES,
                        help="exit 1 when a rule is broken (by the kernels of one role, or all)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--keep", type=Path, help="keep cubins, SASS and assembly here")
    parser.add_argument("--splitk-only", action="store_true",
                        help="only splitk's source check and model (no kernel compilation)")
    args = parser.parse_args()
    if args.splitk_only:
        return splitk_only(args.out)

    tools = Tools.discover()
    missing = [n for n, v in (("nvcc", tools.nvcc), ("cuobjdump", tools.cuobjdump),
                              ("hipcc", tools.hipcc)) if not v]
    if missing:
        print("kernel_report: not found: " + ", ".join(missing) +
              " (cuobjdump: pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm)", file=sys.stderr)
        if args.check and (not tools.nvcc or not tools.hipcc):
            return 1
    work_dir = args.keep or Path(tempfile.mkdtemp(prefix="kernel_report."))
    work_dir.mkdir(parents=True, exist_ok=True)
    kernels = collect(tools, work_dir, args.jobs)
    splitk = {"source": splitk_products_source(), "model": splitk_model(work_dir)}
    if not args.keep:
        shutil.rmtree(work_dir, ignore_errors=True)
    occupancy = occupancy_rows(kernels)
    rows = model(kernels)
    problems = violations(kernels)
    command = "python3 scripts/kernel_report.py " + " ".join(
        a if not a.startswith("/") else os.path.relpath(a, ROOT) for a in sys.argv[1:])
    report = markdown(kernels, occupancy, rows, problems, tools, command.strip(), splitk)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "report.md").write_text(report)
        (args.out / "kernels.json").write_text(json.dumps(
            {"kernels": kernels, "occupancy": occupancy, "model": rows, "splitk": splitk,
             "violations": problems, "devices": DEVICES}, indent=1, default=str) + "\n")
    else:
        print(report)
    for p in problems:
        print("kernel_report: " + p, file=sys.stderr)
    if not args.check:
        return 0
    checked = violations(kernels, ROLES if args.check == "all" else (args.check,))
    if checked:
        print(f"kernel_report: {len(checked)} violation(s) of the rules checked ({args.check})",
              file=sys.stderr)
    return 1 if checked else 0


if __name__ == "__main__":
    sys.exit(main())
