"""NVIDIA: what ptxas -v says of each kernel per architecture (registers, stack
frame, spills, static shared memory), and the facts of a kernel's SASS (its instruction and
tensor-core instruction counts)."""
from __future__ import annotations

import re

SASS_LINE = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
PTXAS_ENTRY = re.compile(r"Compiling entry function '(\S+)' for '(sm_\d+)'")
PTXAS_PROPERTIES = re.compile(r"Function properties for (\S+)")
PTXAS_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
PTXAS_USED = re.compile(r"Used (\d+) registers(?:.*?(\d+) bytes smem)?")


def parse_ptxas(log: str) -> dict[str, dict[str, dict]]:
    """{architecture: {kernel symbol: resources}} from ptxas -v's lines; one
    compile for several architectures prints each kernel once per architecture.
    A stack frame line counts for the kernel whose properties it follows (not
    for a device function ptxas compiled apart)."""
    out: dict[str, dict[str, dict]] = {}
    symbol, current, properties_of = None, None, None
    for line in log.splitlines():
        m = PTXAS_ENTRY.search(line)
        if m:
            symbol, properties_of = m.group(1), None
            current = out.setdefault(m.group(2), {})[symbol] = {
                "registers": 0, "stack": 0, "spill_stores": 0, "spill_loads": 0, "smem": 0}
            continue
        if current is None:
            continue
        m = PTXAS_PROPERTIES.search(line)
        if m:
            properties_of = m.group(1)
            continue
        m = PTXAS_FRAME.search(line)
        if m and properties_of == symbol:
            current.update(stack=int(m.group(1)), spill_stores=int(m.group(2)),
                           spill_loads=int(m.group(3)))
        m = PTXAS_USED.search(line)
        if m:
            current.update(registers=int(m.group(1)), smem=int(m.group(2) or 0))
    return out


def parse_sass(listing: str) -> dict[str, list[str]]:
    """The opcodes of each function of a cuobjdump -sass listing, predicates left out."""
    functions, code = {}, None
    for line in listing.splitlines():
        m = re.search(r"Function : (\S+)", line)
        if m:
            code = functions[m.group(1)] = []
            continue
        m = SASS_LINE.search(line)
        if not m or code is None:
            continue
        text = m.group(2)
        predicate = re.match(r"(@!?U?P\w+)\s+", text)
        code.append((text[predicate.end():] if predicate else text).split()[0])
    return functions


def nv_code_facts(opcodes: list[str]) -> dict:
    bases = [op.split(".")[0] for op in opcodes]
    return {"instructions": sum(1 for op in bases if op != "NOP")}
