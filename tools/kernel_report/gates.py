"""The rules of --check (issue 15), and which kernels break them: no spill
anywhere; stack frame / scratch 0 in the data-movement kernels; no LDS the
compiler made in a kernel beyond the shared memory it declares; modelled
occupancy of the data-movement kernels at least 50% on sm_90 and gfx940."""
from __future__ import annotations

from .occupancy import occupancy_of
from .report import pct

OCCUPANCY_TARGET = 0.5  # the least modelled occupancy of a data-movement kernel


def violations(kernels: list[dict]) -> list[str]:
    """The rules broken by the data-movement kernels."""
    found = []
    for k in kernels:
        if k["role"] != "data_movement":
            continue
        found += occupancy_violations(k)
        for arch, t in k["targets"].items():
            where = f"{k['kernel']} [{arch}]"
            if arch.startswith("sm_"):
                if t.get("spill_stores", 0) or t.get("spill_loads", 0):
                    found.append(f"{where}: spills {t['spill_stores']} B stored, {t['spill_loads']} B loaded")
                if t.get("stack", 0):
                    found.append(f"{where}: {t['stack']} B stack frame in a data-movement kernel")
            else:
                if t.get("vgpr_spill_count", 0) or t.get("sgpr_spill_count", 0):
                    found.append(f"{where}: spills {t['vgpr_spill_count']} VGPRs, {t['sgpr_spill_count']} SGPRs")
                if t.get("private_segment_fixed_size", 0):
                    found.append(f"{where}: {t['private_segment_fixed_size']} B scratch in a data-movement kernel")
                declared = max((v.get("smem", 0) for a, v in k["targets"].items() if a.startswith("sm_")),
                               default=None)
                lds = t.get("group_segment_fixed_size", 0)
                if declared is not None and lds > declared:
                    found.append(f"{where}: {lds} B LDS, {lds - declared} B of it made by the compiler "
                                 f"(the kernel declares {declared} B)")
    return found


def occupancy_violations(k: dict) -> list[str]:
    """A data-movement kernel below the modelled occupancy target on sm_90 or gfx940."""
    return [f"{k['kernel']} [{arch}]: modelled occupancy {pct(occ['occupancy'])} "
            f"({occ['limiter']}) below {pct(OCCUPANCY_TARGET)}"
            for arch, occ in occupancy_of(k).items() if occ["occupancy"] < OCCUPANCY_TARGET]
