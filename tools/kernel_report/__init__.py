"""The rules CI enforces on the csrc/hip kernels, read from what nvcc and hipcc produce.

No GPU is needed or used: every figure it reports is read from compiler output
(registers, stack, spills, LDS, scratch, instruction counts) or, for
occupancy, modelled from those counts and published device figures.

    python3 scripts/kernel_report.py --out DIR      # record: DIR/report.md, DIR/kernels.json
    python3 scripts/kernel_report.py --check [ROLE] # exit 1 when a rule (gates) is broken
                                                    # (ROLE: data_movement or splitk; all by default)
    python3 scripts/kernel_report.py --cache DIR    # reuse DIR's outputs of unchanged compiles
                                                    # (then remove those this run did not use)

The modules, in the order the report runs them:
- compilers: finds nvcc, cuobjdump, hipcc and c++filt, compiles every
  csrc/hip/*.cu for sm_80 and sm_90 and for gfx90a and gfx940, and gathers
  one record per kernel with its figures per target;
- cache: the compile cache (--cache DIR), which spares an unchanged kernel
  its compiles and keeps only the last run's entries;
- nvidia, amd: what ptxas -v, the SASS, and the AMDGPU assembly and metadata
  say (resources, instruction counts, tensor-core and MFMA instructions);
- devices: the published device figures occupancy is modelled from;
- occupancy: theoretical occupancy on sm_90 and gfx940;
- splitk: where splitk's chunk products run, read from the sources;
- gates: the rules of --check (issue 15);
- report: report.md, written with its record (kernels.json);
- cli: the command line.
"""
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
KERNEL_DIR = ROOT / "csrc" / "hip"
