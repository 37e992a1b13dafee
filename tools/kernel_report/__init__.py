"""The rules CI enforces on the csrc/hip kernels, read from what nvcc and hipcc produced.

No GPU is needed or used, and nothing is compiled: every figure it reports is
read from the output of the CMake build's kernel compiles (registers, stack,
spills, LDS, scratch, instruction counts) or, for occupancy, modelled from
those counts and published device figures.

    python3 scripts/kernel_report.py [--build DIR] --out OUT  # record: OUT/report.md, OUT/kernels.json
    python3 scripts/kernel_report.py --check                   # exit 1 when a rule (gates) is broken
DIR is the CMake build directory (default build/cmake), configured with
-DBWDCONV_CUDA=ON -DBWDCONV_HIP=ON and built (scripts/test.sh does both).

The modules, in the order the report runs them:
- builds: where the CMake build put each kernel's object, ptxas lines and
  AMD assembly (sm_80 and sm_90, gfx90a and gfx940), the compilers it used,
  and one record per kernel with its figures per target (cuobjdump gives the SASS);
- nvidia, amd: what ptxas -v, the SASS, and the AMDGPU assembly and metadata
  say (resources, instruction counts);
- devices: the published device figures occupancy is modelled from;
- occupancy: theoretical occupancy on sm_90 and gfx940;
- gates: the rules of --check (issue 15);
- report: report.md, written with its record (kernels.json);
- cli: the command line.
"""
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
KERNEL_DIR = ROOT / "csrc" / "hip"
