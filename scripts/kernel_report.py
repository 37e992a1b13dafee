#!/usr/bin/env python3
"""The kernel report's command line: static evidence about the csrc/hip kernels
from nvcc and hipcc output (tools/kernel_report, whose package docstring says
what each module does)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))

from kernel_report.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
