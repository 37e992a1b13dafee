"""report.md: the kernels' resources, their occupancy and the rules broken, as markdown tables with the text that explains them."""
from __future__ import annotations

import json
from pathlib import Path

from .builds import Tools, tools_line
from .devices import AMD_ARCHS, NV_ARCHS


def pct(x: float) -> str:
    """A fraction as a whole percentage."""
    return f"{100 * x:.0f}%"


def markdown(kernels, occupancy, problems, tools, command) -> str:
    """report.md, section by section."""
    out = header(tools, command)
    out += resources_table(kernels)
    out += occupancy_table(occupancy)
    out += rules_section(problems)
    return "\n".join(out) + "\n"


def write_report(out: Path | None, report: str, record_name: str, record: dict) -> None:
    """report.md and the record (JSON) into `out`; without it, the report on stdout."""
    if out:
        out.mkdir(parents=True, exist_ok=True)
        (out / "report.md").write_text(report)
        (out / record_name).write_text(json.dumps(record, indent=1, default=str) + "\n")
    else:
        print(report)


def header(tools: Tools, command: str) -> list[str]:
    """The title, what is read and what modelled, the command and the compilers."""
    return ["# csrc/hip kernels: the rules CI enforces (compiler output; occupancy modelled)", "",
            "No GPU was used. Registers, stack, spills, LDS, scratch and instruction counts are read",
            "from the compilers' output; occupancy is **modelled** from those counts and the published",
            "device figures cited in `tools/kernel_report/devices.py`.", "",
            f"Command: `{command}`", "",
            f"Toolchain: {tools_line(tools)}", ""]


def resources_table(kernels: list[dict]) -> list[str]:
    """Registers, stack or scratch, spills, shared memory and instructions per kernel and target."""
    out = ["## Resources", "",
           "| kernel | target | regs (NV) / VGPR+AGPR, SGPR (AMD) | stack / scratch B | spills | smem / LDS B | instructions |",
           "|---|---|---|---|---|---|---|"]
    for k in kernels:
        for arch in NV_ARCHS + AMD_ARCHS:
            t = k["targets"].get(arch)
            if not t:
                continue
            if arch.startswith("sm_"):
                out.append(f"| {k['kernel']} | {arch} | {t['registers']} | {t['stack']} | "
                           f"{t['spill_stores']}+{t['spill_loads']} B | {t['smem']} | {t.get('instructions', '-')} |")
            else:
                out.append(f"| {k['kernel']} | {arch} | {t['vgpr_count']}+{t['agpr_count']}, {t['sgpr_count']} | "
                           f"{t['private_segment_fixed_size']} | {t['vgpr_spill_count']}+{t['sgpr_spill_count']} | "
                           f"{t['group_segment_fixed_size']} | {t.get('instructions', '-')} |")
    return out


def occupancy_table(occupancy: list[dict]) -> list[str]:
    """Theoretical occupancy per kernel on sm_90 and gfx940."""
    out = ["", "## Theoretical occupancy (modelled, 256-thread blocks)", "",
           "sm_90: blocks/SM = min(65536 / (ceil(regs*32/256)*256 * warps), 228 KiB / (smem + 1 KiB), 64 / warps, 32);",
           "occupancy = blocks * warps / 64. gfx940: waves/SIMD = min(8, 512 / ceil8(VGPR) (+ AGPRs),",
           "floor(64 KiB / LDS) * waves per group / 4); occupancy = waves / 8.", "",
           "| kernel | sm_90 blocks/SM | sm_90 occupancy | limiter | gfx940 waves/SIMD | gfx940 occupancy | limiter |",
           "|---|---|---|---|---|---|---|"]
    for r in occupancy:
        nv, amd = r.get("sm_90", {}), r.get("gfx940", {})
        out.append(f"| {r['kernel']} | {nv.get('blocks', '-')} | {pct(nv['occupancy']) if nv else '-'} | "
                   f"{nv.get('limiter', '-')} | {amd.get('waves_per_simd', '-')} | "
                   f"{pct(amd['occupancy']) if amd else '-'} | {amd.get('limiter', '-')} |")
    return out


def rules_section(problems: list[str]) -> list[str]:
    """The rules broken, or that none is."""
    out = ["## Rules (issue 15)", ""]
    if problems:
        out += [f"{len(problems)} violation(s):", ""] + [f"- {p}" for p in problems]
    else:
        out += ["No violation: no spill; stack frame and scratch 0 in the data-movement kernels; no",
                "compiler-made LDS; data-movement occupancy at least 50% on sm_90 and gfx940."]
    return out
