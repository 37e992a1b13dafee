"""AMD: the AMDGPU metadata of each kernel (VGPR/SGPR/AGPR counts, LDS, scratch,
spills), the assembly as instructions with their branches, the modelled issue
cycles of an instruction mix on an MI300X SIMD, and the facts of a kernel's
code (instruction counts, MFMA and scratch instructions, the data-movement
loops)."""
from __future__ import annotations

import re

from .control_flow import Instruction
from .devices import MI300X
from .loops import Isa, data_movement_loop

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


def parse_amd_code(asm: str) -> dict[str, list[Instruction]]:
    functions, code, current = {}, None, None
    pending_label = None
    for line in asm.splitlines():
        m = re.match(r"^(_Z\w+):", line)
        if m:
            current, code = m.group(1), []
            functions[current] = code
            continue
        if code is None:
            continue
        if line.startswith("\t.section") and ".text" not in line or line.startswith(".Lfunc_end"):
            code = None
            continue
        m = re.match(r"^(\.LBB\w+):", line)
        if m:
            pending_label = m.group(1)
            continue
        m = re.match(r"^\t([a-z][a-z0-9_]*)(?:\s+(.*?))?\s*(?:;.*)?$", line)
        if not m:
            continue
        opcode, operands = m.group(1), (m.group(2) or "")
        ins = Instruction(text=line.strip(), opcode=opcode, label=pending_label)
        pending_label = None
        if opcode == "s_branch":
            ins.targets, ins.ends = [operands.split()[0]], True
        elif opcode.startswith("s_cbranch"):
            ins.targets, ins.conditional = [operands.split()[0]], True
        elif opcode in ("s_endpgm", "s_setpc_b64"):
            ins.ends = True
        code.append(ins)
    return functions


def amd_keep(ins: Instruction) -> bool:
    return ins.opcode != "s_nop"


def amd_is_store(ins: Instruction) -> bool:
    return re.match(r"(global|buffer|flat)_(store|atomic)", ins.opcode) is not None


AMD_QUARTER_RATE = re.compile(r"v_(mul_lo_u32|mul_hi_u32|mul_hi_i32|mul_lo_i32|mad_u64_u32|mad_i64_i32)")


def amd_class(opcode: str) -> str:
    if opcode.startswith(("s_load", "s_buffer_load", "s_store", "s_dcache")):
        return "smem"
    if opcode.startswith(("s_branch", "s_cbranch", "s_waitcnt", "s_barrier", "s_sendmsg",
                          "s_setprio", "s_endpgm", "s_sleep")):
        return "branch_message"
    if opcode.startswith("s_"):
        return "salu"
    if opcode.startswith(("global_", "buffer_", "flat_", "scratch_")):
        return "vmem"
    if opcode.startswith("ds_"):
        return "lds"
    if opcode.startswith("v_"):
        return "valu"
    return "other"


def amd_cycles_per_iteration(hist: dict[str, int]) -> tuple[int, dict[str, int]]:
    """Cycles per wave64-iteration on one SIMD: each class issues at most once per
    4-cycle turn; a VALU instruction occupies the SIMD 4 cycles (16 for quarter rate)."""
    classes: dict[str, int] = {}
    valu_cycles = 0
    for op, n in hist.items():
        c = amd_class(op)
        classes[c] = classes.get(c, 0) + n
        if c == "valu":
            valu_cycles += n * (MI300X["quarter_rate_cycles"] if AMD_QUARTER_RATE.match(op) else 4)
    turns = max([4 * n for c, n in classes.items() if c != "valu"] + [0])
    return max(valu_cycles, turns), classes


def amd_is_wide_store(ins: Instruction) -> bool:
    return amd_is_store(ins) and ins.opcode.endswith("dwordx4")


def amd_is_wide_load(ins: Instruction) -> bool:
    return re.match(r"(global|buffer|flat)_load_dwordx4", ins.opcode) is not None


def amd_is_narrow_load(ins: Instruction) -> bool:
    return re.match(r"(global|buffer|flat)_load_(?!dwordx4)", ins.opcode) is not None


AMD = Isa(keep=amd_keep, is_store=amd_is_store, is_wide_store=amd_is_wide_store,
          is_wide_load=amd_is_wide_load, is_narrow_load=amd_is_narrow_load,
          is_division=lambda ins: ins.opcode.startswith(("v_mul_hi_u32", "s_mul_hi_u32")),
          is_barrier=lambda ins: ins.opcode == "s_barrier",
          cycles=lambda hist: amd_cycles_per_iteration(hist)[0])


def amd_code_facts(code: list[Instruction], role: str, dense: int | None = None,
                   staged: bool = False) -> dict:
    facts = {"instructions": sum(1 for ins in code if amd_keep(ins)),
             "mfma_instructions": sum(1 for ins in code if ins.opcode.startswith("v_mfma")),
             "scratch_instructions": sum(1 for ins in code if ins.opcode.startswith("scratch_")
                                         or re.match(r"buffer_(load|store)", ins.opcode) is not None)}
    if role == "data_movement":
        facts.update(data_movement_loop(code, AMD, dense, staged))
    return facts
