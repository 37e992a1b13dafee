"""NVIDIA: what ptxas -v says of each kernel (registers, stack frame, spills,
static shared memory), the SASS listing as instructions with their branches,
the modelled issue cycles of an instruction mix on an H100 sub-partition, and
the facts of a kernel's code (instruction counts, tensor-core and local-memory
instructions, the data-movement loops)."""
from __future__ import annotations

import re

from .control_flow import Instruction
from .devices import H100
from .loops import Isa, data_movement_loop

SASS_LINE = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
PTXAS_ENTRY = re.compile(r"Compiling entry function '(\S+)' for '(sm_\d+)'")
PTXAS_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
PTXAS_USED = re.compile(r"Used (\d+) registers(?:.*?(\d+) bytes smem)?")


def parse_ptxas(log: str) -> dict[str, dict]:
    out, current = {}, None
    for line in log.splitlines():
        m = PTXAS_ENTRY.search(line)
        if m:
            current = m.group(1)
            out[current] = {"registers": 0, "stack": 0, "spill_stores": 0, "spill_loads": 0, "smem": 0}
            continue
        if current is None:
            continue
        m = PTXAS_FRAME.search(line)
        if m and "Function properties for " + current in log:
            out[current].update(stack=int(m.group(1)), spill_stores=int(m.group(2)),
                                spill_loads=int(m.group(3)))
        m = PTXAS_USED.search(line)
        if m:
            out[current]["registers"] = int(m.group(1))
            smem = re.search(r"(\d+) bytes smem", line)
            out[current]["smem"] = int(smem.group(1)) if smem else 0
    return out


def parse_sass(listing: str) -> dict[str, list[Instruction]]:
    functions, current, code = {}, None, None
    for line in listing.splitlines():
        m = re.search(r"Function : (\S+)", line)
        if m:
            current, code = m.group(1), []
            functions[current] = code
            continue
        m = SASS_LINE.search(line)
        if not m or code is None:
            continue
        address, text = m.group(1), m.group(2)
        predicate = re.match(r"(@!?U?P\w+)\s+", text)
        body = text[predicate.end():] if predicate else text
        opcode = body.split()[0]
        ins = Instruction(text=text, opcode=opcode, label="0x" + address.lstrip("0").rjust(1, "0"))
        base = opcode.split(".")[0]
        conditional = bool(predicate) and "PT" not in predicate.group(1).replace("UPT", "")
        target = re.search(r"(0x[0-9a-f]+)\s*$", body)
        if base in ("BRA", "BRX", "JMP", "JMX") and target:
            ins.targets = ["0x" + target.group(1)[2:].lstrip("0").rjust(1, "0")]
            ins.conditional, ins.ends = conditional, not conditional
        elif base in ("EXIT", "RET", "KILL", "BPT") or (base in ("BRX", "JMX")):
            ins.ends = not conditional
        elif base == "CALL" and target:
            ins.call = "0x" + target.group(1)[2:].lstrip("0").rjust(1, "0")
        code.append(ins)
    for code in functions.values():
        resolve_calls(code, lambda ins: ins.opcode.startswith("RET"))
    return functions


def resolve_calls(code: list[Instruction], is_return) -> None:
    """A call costs its callee's instructions up to the return (plus the call)."""
    index = {ins.label: i for i, ins in enumerate(code) if ins.label}
    for ins in code:
        if ins.call and ins.call in index:
            length = 0
            for callee in code[index[ins.call]:]:
                length += 1
                if is_return(callee):
                    break
            ins.weight = 1 + length


def sass_keep(ins: Instruction) -> bool:
    return ins.opcode.split(".")[0] != "NOP"


def sass_is_store(ins: Instruction) -> bool:
    return ins.opcode.split(".")[0] in ("STG", "ST", "RED", "ATOMG")


SASS_INT_PIPE = {"IADD3", "IADD", "IADD32I", "IMAD", "IMAD32I", "IMUL", "IMUL32I", "LOP3", "LOP",
                 "LOP32I", "SHF", "SHL", "SHR", "ISETP", "IMNMX", "LEA", "SEL", "PRMT", "IABS",
                 "ISCADD", "BFE", "BFI", "FLO", "POPC", "BMSK", "SGXT", "VIADD", "VIMNMX", "ICMP",
                 "IDP", "PLOP3", "BREV", "MOV", "MOV32I", "VIADDMNMX"}
SASS_TENSOR = ("HMMA", "HGMMA", "IMMA", "DMMA", "WGMMA", "BMMA", "QGMMA", "UTCHMMA")


def sass_cycles_per_iteration(hist: dict[str, int]) -> tuple[int, int, int]:
    """Cycles per warp-iteration on one SM sub-partition: one instruction issued per
    clock, and the 32-bit integer pipe at half that rate. Returns (cycles, issued, int ops)."""
    issued = sum(hist.values())
    int_ops = sum(n for op, n in hist.items() if op.split(".")[0] in SASS_INT_PIPE)
    return max(issued, H100["int_cycles_per_warp_instruction"] * int_ops), issued, int_ops


def sass_is_wide_store(ins: Instruction) -> bool:
    return sass_is_store(ins) and ins.opcode.endswith(".128")


def sass_is_wide_load(ins: Instruction) -> bool:
    """A 16-byte global load, or a generic one (a pointer read from a parameter array)."""
    return ins.opcode.split(".")[0] in ("LDG", "LD") and ins.opcode.endswith(".128")


def sass_is_narrow_load(ins: Instruction) -> bool:
    return ins.opcode.split(".")[0] in ("LDG", "LD") and not ins.opcode.endswith(".128")


SASS = Isa(keep=sass_keep, is_store=sass_is_store, is_wide_store=sass_is_wide_store,
           is_wide_load=sass_is_wide_load, is_narrow_load=sass_is_narrow_load,
           is_division=lambda ins: ins.opcode.startswith("IMAD.HI"),
           is_barrier=lambda ins: ins.opcode.startswith("BAR"),
           cycles=lambda hist: sass_cycles_per_iteration(hist)[0])


def nv_code_facts(code: list[Instruction], role: str, dense: int | None = None,
                  staged: bool = False) -> dict:
    ops = [ins.opcode.split(".")[0] for ins in code]
    facts = {"instructions": sum(1 for ins in code if sass_keep(ins)),
             "tensor_core_instructions": sum(1 for op in ops if op in SASS_TENSOR),
             "local_memory_instructions": sum(1 for op in ops if op in ("LDL", "STL"))}
    if role == "data_movement":
        facts.update(data_movement_loop(code, SASS, dense, staged))
    return facts
