"""Static evidence about the csrc/hip kernels, read from what nvcc and hipcc produce.

No GPU is needed or used: every figure it reports is either read from compiler
output (registers, stack, spills, LDS, instruction sequences) or modelled from
those counts and published device figures. Nothing here is a measurement of a
kernel running on a GPU.

    python3 scripts/kernel_report.py --out DIR      # record: DIR/report.md, DIR/kernels.json
    python3 scripts/kernel_report.py --check [ROLE] # exit 1 when a rule (gates) is broken
                                                    # (ROLE: data_movement or splitk; all by default)
    python3 scripts/kernel_report.py --splitk-only  # splitk's source check and model alone
    python3 scripts/kernel_report.py --cache DIR    # reuse DIR's outputs of unchanged compiles
                                                    # (then remove those this run did not use)

The modules, in the order the report runs them:
- compilers: finds nvcc, cuobjdump, hipcc and c++filt, compiles every
  csrc/hip/*.cu for sm_80 and sm_90 and for gfx90a and gfx940, and gathers
  one record per kernel with its figures per target;
- cache: the compile cache (--cache DIR), which spares an unchanged kernel
  its compiles and keeps only the last run's entries;
- nvidia, amd: what ptxas -v, the SASS, and the AMDGPU assembly and metadata
  say (resources, instructions, issue cycles per instruction mix);
- control_flow: basic blocks, dominators, natural loops and the heaviest
  path through a loop body;
- loops: each data-movement kernel's per-element, chunk or tile loop and
  the paths through it;
- devices: the published device figures every modelled number comes from;
- occupancy: theoretical occupancy on sm_90 and gfx940;
- seeds, walks: the seed lines' data-movement launches and their modelled
  issue-bound ceiling on H100 SXM and MI300X;
- splitk: where splitk's chunk products run, and its modelled time on
  seed 001's line;
- gates: the rules of --check (issue 15);
- report: report.md, written with its record (kernels.json, splitk.json);
- cli: the command line.
"""
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
KERNEL_DIR = ROOT / "csrc" / "hip"
SEEDS = ROOT / "python" / "bwdconv" / "bench" / "suites" / "seeds.txt"
