"""AMD: the AMDGPU metadata of each kernel (VGPR/SGPR/AGPR counts, LDS, scratch,
spills), and the facts of a kernel's assembly (its instruction and MFMA
instruction counts)."""
from __future__ import annotations

import re

AMD_METADATA_KEYS = ("vgpr_count", "sgpr_count", "agpr_count", "group_segment_fixed_size",
                     "private_segment_fixed_size", "vgpr_spill_count", "sgpr_spill_count",
                     "max_flat_workgroup_size")


def parse_amd_metadata(asm: str) -> dict[str, dict]:
    block = asm.split(".amdgpu_metadata", 1)[1].split(".end_amdgpu_metadata", 1)[0]
    kernels = re.split(r"\n  - ", block)
    out = {}
    for k in kernels:
        name = re.search(r"\.name:\s+(\S+)", k)
        if not name:
            continue
        entry = {}
        for key in AMD_METADATA_KEYS:
            m = re.search(r"\." + key + r":\s+(\d+)", k)
            entry[key] = int(m.group(1)) if m else 0
        out[name.group(1)] = entry
    return out


def parse_amd_code(asm: str) -> dict[str, list[str]]:
    """The opcodes of each kernel of hipcc's assembly."""
    functions, code = {}, None
    for line in asm.splitlines():
        m = re.match(r"^(_Z\w+):", line)
        if m:
            code = functions[m.group(1)] = []
            continue
        if code is None:
            continue
        if line.startswith("\t.section") and ".text" not in line or line.startswith(".Lfunc_end"):
            code = None
            continue
        m = re.match(r"^\t([a-z][a-z0-9_]*)(?:\s+(.*?))?\s*(?:;.*)?$", line)
        if m:
            code.append(m.group(1))
    return functions


def amd_code_facts(opcodes: list[str]) -> dict:
    return {"instructions": sum(1 for op in opcodes if op != "s_nop")}
