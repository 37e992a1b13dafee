#!/usr/bin/env python3
"""Static evidence about the csrc/hip kernels, read from what nvcc and hipcc produce.

No GPU is needed or used: every figure below is either read from compiler
output (registers, stack, spills, LDS, instruction sequences) or modelled from
those counts and published device figures. Nothing here is a measurement of a
kernel running on a GPU.

    python3 scripts/kernel_report.py --out DIR      # record: DIR/report.md, DIR/kernels.json
    python3 scripts/kernel_report.py --check [ROLE] # exit 1 when a rule below is broken
                                                    # (ROLE: data_movement or splitk; all by default)

What it does:
- compiles every csrc/hip/*.cu for sm_80 and sm_90 (nvcc -cubin -Xptxas -v:
  registers, stack frame, spill bytes, static shared memory; cuobjdump -sass:
  the instructions) and for gfx90a and gfx940 (hipcc --cuda-device-only -S: the
  AMDGPU metadata gives VGPR/SGPR/AGPR counts, LDS, scratch and spills);
- finds each data-movement kernel's per-element loop: for a staged walk
  (`*_staged_kernel`: a block stages a tile of dst in shared memory, then
  stores it in aligned 16-byte chunks) the pass through its tile loop with
  and without describing the tile's sources, see staged_tile_loop; for a dense walk
  (`*_dense_kernel`: runs of aligned 16-byte chunks of dst's memory, 64
  chunks apart per thread, the row's set-up and cursor carried from chunk to
  chunk) the paths through its chunk loop: the row set-up, a chunk inside its
  row's interior (gathered or copied), a chunk of one or two row pieces, a
  chunk whose elements are walked one by one, and the next row's set-up
  inside that walk, see
  dense_chunk_loop; for other kernels the innermost natural
  loop (a back-edge branch to a block that dominates it) that holds a global
  store, and counts the instructions on the longest path through it (one
  longest-path pass over the body with the retreating edges of a depth-first
  walk removed: linear in blocks and edges, and acyclic even where a cycle has
  two entries, which hipcc emits);
- checks where splitk's chunk products run: on the vendor GEMM (ATen's
  batched GEMM in csrc/ops/splitk.cpp's kernel path, no product kernel in
  csrc/hip/splitk.cu), or in a product kernel with tensor-core (HMMA/HGMMA)
  or MFMA instructions; and models splitk on seed 001's line (the planner's
  own chunks and steps, from scripts/splitk_layout.cpp);
- computes theoretical occupancy on sm_90 and gfx940 and a modelled
  issue-bound ceiling of the data-movement kernels on H100 SXM and MI300X for
  the seed lines (benchmarks/suites/seeds.txt), each on the walk the host
  launches for it: for a dense dst (dx and the scatter buffer always are)
  the staged walk where its rows fit (stride-2 rows, or the interleave's
  rows of a few channels in packets along W: staged_rows), else
  the dense walk where the kernel has one, else the row walk
  (instantiation_for). A dense walk's warp (wave) takes consecutive chunks
  and issues per pass each path one of its lanes takes, once
  (dense_walk_cost, run_shares); a staged walk's warps each pass a tile loop
  once per 8 KB tile, some of them describing the tile's rows first
  (staged_walk_cost, staged_tile_loop).

The rules of --check (issue 15): no spill anywhere; stack frame / scratch 0 in
the data-movement kernels; no LDS the compiler made in a kernel beyond the
shared memory it declares; modelled occupancy of the data-movement kernels at
least 50% on sm_90 and gfx940; splitk's products on tensor cores / MFMA or on
the vendor GEMM.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import glob
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KERNEL_DIR = ROOT / "csrc" / "hip"
SEEDS = ROOT / "benchmarks" / "suites" / "seeds.txt"

NV_ARCHS = ("sm_80", "sm_90")
AMD_ARCHS = ("gfx90a", "gfx940")
# The same device flags setup.py passes (-O3); the block size is launch.h's kThreadsPerBlock.
NVCC_FLAGS = ["-O3", "-std=c++17", "--expt-relaxed-constexpr"]
HIPCC_FLAGS = ["-O3", "-std=c++17", "-x", "hip"]
THREADS_PER_BLOCK = 256

# Kernels by role: what moves data (bits copied, no arithmetic) and what computes splitk.
DATA_MOVEMENT_SOURCES = ("interleave.cu", "scatter.cu")
SPLITK_SOURCES = ("splitk.cu",)

# ---------------------------------------------------------------------------
# Published device figures. Every modelled number below comes from these.
# ---------------------------------------------------------------------------
# H100 SXM5 (sm_90):
#  - 132 SMs, 1.98 GHz boost clock (FP64/FP32 clock), 3.35 TB/s HBM3: NVIDIA H100
#    Tensor Core GPU datasheet and architecture whitepaper (2022), H100 SXM5 column;
#    collected at https://glennklockwood.com/garden/processors/h100
#  - 4 warp schedulers per SM, each issuing one warp instruction per clock (4x32
#    thread-instructions/clock/SM); 65536 32-bit registers, 228 KiB shared memory
#    (1 KiB of it reserved per block), 64 warps and 32 blocks per SM; registers
#    allocated per warp in units of 256: CUDA C++ Programming Guide, "Compute
#    Capabilities", table "Technical Specifications per Compute Capability" (9.0),
#    https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#compute-capabilities
#  - 32-bit integer add/compare/logic/shift/multiply-add: 64 results per clock per SM
#    (half the issue rate): same guide, "Arithmetic Instructions" throughput table,
#    https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#arithmetic-instructions
# MI300X (gfx942; gfx940 is the same CDNA3 generation and stands in for it because
# the clang here does not know gfx942):
#  - 304 CUs, 2.1 GHz peak engine clock, 5.3 TB/s HBM3: AMD Instinct MI300X data sheet,
#    https://www.amd.com/content/dam/amd/en/documents/instinct-tech-docs/data-sheets/amd-instinct-mi300x-data-sheet.pdf
#  - 4 SIMDs per CU, each 16 lanes wide: a wave64 vector instruction takes 4 cycles,
#    and each SIMD issues at most one instruction of a kind (VALU, SALU, vector
#    memory, LDS, scalar memory, branch/message) per 4-cycle turn; 512 VGPRs per lane
#    per SIMD (unified VGPR+AGPR file, allocated in granules of 8), at most 8 waves per
#    SIMD, 64 KiB LDS per CU: AMD CDNA3 ISA reference guide, chapters 1-3,
#    https://www.amd.com/content/dam/amd/en/documents/instinct-tech-docs/instruction-set-architectures/amd-instinct-mi300-cdna3-instruction-set-architecture.pdf
#    and ROCm HIP "Hardware implementation",
#    https://rocm.docs.amd.com/projects/HIP/en/latest/understand/hardware_implementation.html
#  - 32-bit integer multiplies (v_mul_lo/hi_u32, v_mad_u64_u32, ...) are taken as
#    quarter rate (16 cycles per wave64), the GCN/CDNA rate; conservative for the model.
# Dense (no sparsity) 16-bit tensor throughput and the last-level caches, for splitk's model:
#  - H100 SXM5: 989.4 TFLOPS BF16/FP16 dense (1,979 with sparsity), 50 MB L2: NVIDIA H100
#    Tensor Core GPU datasheet (2022) and architecture whitepaper, SXM5 column.
#  - MI300X: 1307.4 TFLOPS BF16/FP16 dense (2,614.9 with sparsity), 256 MB Infinity Cache:
#    AMD Instinct MI300X data sheet (above).
H100 = {
    "name": "H100 SXM5", "arch": "sm_90", "units": 132, "clock_hz": 1.98e9,
    "dense_16bit_flops": 989.4e12, "last_level_cache_bytes": 50e6,
    "schedulers_per_unit": 4, "lanes_per_scheduler": 32, "hbm_bytes_per_s": 3.35e12,
    "registers_per_unit": 65536, "shared_per_unit": 228 * 1024, "shared_reserved_per_block": 1024,
    "max_warps_per_unit": 64, "max_blocks_per_unit": 32, "register_unit": 256, "warp": 32,
    "int_cycles_per_warp_instruction": 2,
}
MI300X = {
    "name": "MI300X", "arch": "gfx940", "units": 304, "clock_hz": 2.1e9, "simds_per_unit": 4,
    "dense_16bit_flops": 1307.4e12, "last_level_cache_bytes": 256e6,
    "lanes_per_simd_cycle": 16, "wave": 64, "hbm_bytes_per_s": 5.3e12,
    "vgprs_per_simd_lane": 512, "vgpr_granule": 8, "max_waves_per_simd": 8,
    "lds_per_unit": 64 * 1024, "quarter_rate_cycles": 16,
}
DEVICES = (H100, MI300X)
HBM_TARGET = 0.8  # issue 15: modelled ceiling >= 80% of HBM
OCCUPANCY_TARGET = 0.5


# ---------------------------------------------------------------------------
# Toolchain
# ---------------------------------------------------------------------------
def find_tool(name: str, extra_dirs: list[Path]) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    for d in extra_dirs:
        candidate = d / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def cuda_binary_dirs() -> list[Path]:
    """nvcc's own bin, then the PyPI nvidia-cuda-cuobjdump/-nvdisasm wheels of
    this python or of the project's venv (CUDA 13 toolkits may ship without cuobjdump)."""
    dirs = [Path("/usr/local/cuda/bin")]
    prefixes = {Path(sys.prefix), Path(os.environ.get("BWDCONV_VENV", Path.home() / ".cache/bwdconv/venv"))}
    for prefix in prefixes:
        for site in glob.glob(str(prefix / "lib" / "python3*" / "site-packages")):
            dirs += [Path(p) for p in sorted(glob.glob(site + "/nvidia/cu1*/bin"), reverse=True)]
    return dirs


@dataclass
class Tools:
    nvcc: str | None
    cuobjdump: str | None
    hipcc: str | None
    cxxfilt: str | None

    @staticmethod
    def discover() -> "Tools":
        dirs = cuda_binary_dirs()
        cuobjdump = find_tool("cuobjdump", dirs)
        return Tools(find_tool("nvcc", dirs), cuobjdump, find_tool("hipcc", []),
                     find_tool("c++filt", []))

    def cuobjdump_env(self) -> dict:
        env = dict(os.environ)
        if self.cuobjdump:  # cuobjdump -sass runs the nvdisasm next to it
            env["PATH"] = str(Path(self.cuobjdump).parent) + os.pathsep + env.get("PATH", "")
        return env


def run(cmd: list[str], env: dict | None = None) -> subprocess.CompletedProcess:
    result = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{result.stderr[-4000:]}")
    return result


def demangle(names: list[str], cxxfilt: str | None) -> dict[str, str]:
    if not names or not cxxfilt:
        return {n: n for n in names}
    out = subprocess.run([cxxfilt], input="\n".join(names), capture_output=True, text=True).stdout
    return dict(zip(names, out.splitlines()))


def short_name(demangled: str) -> str:
    """void bwdconv::hip::(anonymous namespace)::interleave_kernel<unsigned short, int>(...) ->
    interleave_kernel<unsigned short, int>: the same on both vendors."""
    name = demangled[5:] if demangled.startswith("void ") else demangled
    depth, end = 0, len(name)
    for i, ch in enumerate(name):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0 and not name.startswith("(anonymous", i):
            end = i
            break
    return name[:end].replace("bwdconv::hip::", "").replace("(anonymous namespace)::", "")


# ---------------------------------------------------------------------------
# Control flow: natural loops and the longest path through a loop body
# ---------------------------------------------------------------------------
@dataclass
class Instruction:
    text: str
    opcode: str
    label: str | None = None          # a label defined right before it
    targets: list[str] = field(default_factory=list)  # branch targets (labels)
    conditional: bool = False
    ends: bool = False                # no fall-through (unconditional exit/return/branch)
    call: str | None = None           # callee label
    weight: int = 1                   # issue slots (a call adds its callee's length)


@dataclass
class Block:
    start: int
    end: int                          # exclusive
    succ: list[int] = field(default_factory=list)
    pred: list[int] = field(default_factory=list)


def build_blocks(code: list[Instruction]) -> list[Block]:
    """Basic blocks: a block starts at a branch or call target and after a branch
    or exit (SASS labels every instruction with its address; only targets split)."""
    labels = {ins.label: i for i, ins in enumerate(code) if ins.label}
    targets = {t for ins in code for t in ins.targets + ([ins.call] if ins.call else [])}
    leaders = {0}
    for i, ins in enumerate(code):
        if ins.label in targets:
            leaders.add(i)
        if ins.targets or ins.ends:
            leaders.add(i + 1)
    starts = sorted(s for s in leaders if s < len(code))
    blocks = [Block(s, e) for s, e in zip(starts, starts[1:] + [len(code)])]
    index_of = {b.start: k for k, b in enumerate(blocks)}
    for k, b in enumerate(blocks):
        last = code[b.end - 1]
        for t in last.targets:
            if t in labels and labels[t] in index_of:
                b.succ.append(index_of[labels[t]])
        if not last.ends and k + 1 < len(blocks):
            b.succ.append(k + 1)
    for k, b in enumerate(blocks):
        for s in b.succ:
            blocks[s].pred.append(k)
    return blocks


def depth_first(blocks: list[Block], root: int, inside=None) -> tuple[list[int], set[tuple[int, int]]]:
    """The blocks reachable from root along edges that stay in `inside` (every
    block when None) in reverse postorder, and the retreating edges of that walk
    (x -> t with t still on its stack). Without the retreating edges the graph is
    acyclic and the order topological, whatever the graph: in a reducible one they
    are the back edges of its loops, in an irreducible one (a cycle entered at
    two blocks, which the compilers do emit) one more edge per such cycle.
    Iterative: no recursion limit on long functions."""
    order, retreating = [], set()
    on_stack = {root: True}
    stack = [(root, iter(blocks[root].succ))]
    while stack:
        x, successors = stack[-1]
        for t in successors:
            if inside is not None and t not in inside:
                continue
            if t not in on_stack:
                on_stack[t] = True
                stack.append((t, iter(blocks[t].succ)))
                break
            if on_stack[t]:
                retreating.add((x, t))
        else:
            stack.pop()
            on_stack[x] = False
            order.append(x)
    return order[::-1], retreating


class Dominance:
    """Dominators of the blocks reachable from block 0: immediate dominators by
    Cooper, Harvey and Kennedy's iteration over reverse postorder ("A Simple, Fast
    Dominance Algorithm", 2001), queries in O(1) from the preorder intervals of the
    dominator tree. A block no path reaches is dominated by itself alone."""

    def __init__(self, blocks: list[Block]):
        order, _ = depth_first(blocks, 0)
        rank = {b: i for i, b in enumerate(order)}
        idom = {0: 0}

        def common(a: int, b: int) -> int:
            while a != b:
                while rank[a] > rank[b]:
                    a = idom[a]
                while rank[b] > rank[a]:
                    b = idom[b]
            return a

        changed = True
        while changed:
            changed = False
            for b in order[1:]:
                preds = [p for p in blocks[b].pred if p in idom]
                new = preds[0]
                for p in preds[1:]:
                    new = common(p, new)
                if idom.get(b) != new:
                    idom[b], changed = new, True
        children: dict[int, list[int]] = {}
        for b in order[1:]:
            children.setdefault(idom[b], []).append(b)
        self.enter, self.leave, clock, stack = {}, {}, 0, [(0, False)]
        while stack:
            b, done = stack.pop()
            clock += 1
            if done:
                self.leave[b] = clock
                continue
            self.enter[b] = clock
            stack.append((b, True))
            stack += [(c, False) for c in children.get(b, [])]

    def dominates(self, a: int, b: int) -> bool:
        if b not in self.enter:
            return a == b
        return a in self.enter and self.enter[a] <= self.enter[b] and self.leave[b] <= self.leave[a]


def natural_loops(blocks: list[Block], dom: Dominance) -> list[tuple[int, set[int], list[int]]]:
    """(header, body, latches) per loop header."""
    loops: dict[int, tuple[set[int], list[int]]] = {}
    for u, b in enumerate(blocks):
        for h in b.succ:
            if dom.dominates(h, u):  # back edge u -> h
                body, stack = {h, u}, [u]
                while stack:
                    x = stack.pop()
                    if x == h:
                        continue
                    for p in blocks[x].pred:
                        if p not in body:
                            body.add(p)
                            stack.append(p)
                entry = loops.setdefault(h, (set(), []))
                entry[0].update(body)
                entry[1].append(u)
    return [(h, body, latches) for h, (body, latches) in loops.items()]


def block_weight(code: list[Instruction], b: Block, keep) -> int:
    return sum(ins.weight for ins in code[b.start:b.end] if keep(ins))


def longest_path(code, blocks, header, body, latches, keep) -> tuple[int, int, int]:
    """Instructions on the longest and shortest paths header -> latch inside `body`
    with its retreating edges removed (inner loops counted once), and the number
    of inner loops."""
    order, retreating = depth_first(blocks, header, body)
    best = {header: block_weight(code, blocks[header], keep)}
    least = dict(best)
    for x in order:
        for s in blocks[x].succ:
            if s in body and (x, s) not in retreating:
                w = block_weight(code, blocks[s], keep)
                best[s] = max(best.get(s, -1), best[x] + w)
                least[s] = min(least.get(s, 1 << 60), least[x] + w)
    inner = len({s for (_, s) in retreating if s != header})
    ends = [l for l in latches if l in best]
    return max(best[l] for l in ends), min(least[l] for l in ends), inner


def heaviest_path(code, blocks, header, body, latches, keep, weight_of=None,
                  require=None, forbid=None, sites=frozenset(), times=0,
                  path_out: list | None = None) -> dict[str, int] | None:
    """Opcode histogram of the heaviest path header -> latch through `body` with
    its retreating edges removed (inner loops counted once, or not at all when
    weight_of gives their blocks 0). The path passes through a block that
    `require` accepts and through none that `forbid` accepts (each a predicate
    on a block's instructions or a set of blocks), and enters the
    blocks `sites` (from a block outside them) exactly `times` times;
    None if no such path. `path_out`, when given, receives the path's blocks. A longest-path pass over the acyclic graph with that
    state per block: O((blocks + edges) x (times + 1)) whatever the branching."""
    order, retreating = depth_first(blocks, header, body)
    # a predicate on a block's instructions, or a set of blocks
    test = lambda pred, k: (k in pred if isinstance(pred, (set, frozenset))
                            else bool(pred and pred(code[blocks[k].start:blocks[k].end])))
    weight = {k: (weight_of(k) if weight_of else block_weight(code, blocks[k], keep)) for k in order}
    allowed = {k: not test(forbid, k) for k in order}
    hit = {k: test(require, k) for k in order}
    if not allowed[header]:
        return None
    start = (header, hit[header] or require is None, int(header in sites))
    best, prev = {start: weight[header]}, {start: None}
    by_block: dict[int, list[tuple]] = {header: [start]}
    for x in order:
        for state in by_block.get(x, ()):
            _, passed, entries = state
            for t in blocks[x].succ:
                if t not in body or (x, t) in retreating or not allowed[t]:
                    continue
                n = entries + (t in sites and x not in sites)
                if n > times:
                    continue
                nxt = (t, passed or hit[t], n)
                w = best[state] + weight[t]
                if nxt not in best:
                    by_block.setdefault(t, []).append(nxt)
                if w > best.get(nxt, -1):
                    best[nxt], prev[nxt] = w, state
    ends = [(l, True, times) for l in latches if (l, True, times) in best]
    if not ends:
        return None
    node = max(ends, key=lambda n: best[n])
    hist: dict[str, int] = {}
    while node is not None:  # prev follows the topological order back: no cycle
        k = node[0]
        if path_out is not None:
            path_out.append(k)
        if weight[k]:
            for ins in code[blocks[k].start:blocks[k].end]:
                if keep(ins):
                    hist[ins.opcode] = hist.get(ins.opcode, 0) + ins.weight
        node = prev[node]
    return hist


def loops_with_stores(code, is_store):
    blocks = build_blocks(code)
    dom = Dominance(blocks)
    loops = []
    for header, body, latches in natural_loops(blocks, dom):
        if any(is_store(code[i]) for k in body for i in range(blocks[k].start, blocks[k].end)):
            loops.append((header, body, latches))
    return blocks, dom, sorted(loops, key=lambda l: sum(blocks[k].end - blocks[k].start for k in l[1]))


def per_element_loop(code: list[Instruction], is_store, keep, wide_store, wide_load,
                     cycles) -> dict | None:
    """The per-element loops of a data-movement kernel: the innermost loops that
    hold a global store. An element walk has one. A row walk has, inside its
    loop over rows, loops that store whole 16-byte chunks (a `copy` loop when
    it loads 16 bytes too, else a `gather` loop) and loops over a row's end
    chunks (narrow stores). Each is counted along its heaviest path; the loop
    over rows gives the per-row overhead, every loop inside it left out."""
    blocks, dom, loops = loops_with_stores(code, is_store)
    if not loops:
        return None
    holds = lambda loop, test: any(test(code[i]) for k in loop[1]
                                   for i in range(blocks[k].start, blocks[k].end))
    innermost = [l for l in loops if not any(m[1] < l[1] for m in loops)]
    chunk_loops = [l for l in innermost if holds(l, wide_store)]
    header, body, latches = (chunk_loops or innermost)[0]
    longest, shortest, inner = longest_path(code, blocks, header, body, latches, keep)
    narrow_store = lambda b: any(is_store(i) and not wide_store(i) for i in b)
    path = lambda l, **kw: heaviest_path(code, blocks, l[0], l[1], l[2], keep, **kw)
    costs = lambda ls, **kw: [cost(h, cycles) for h in (path(l, **kw) for l in ls) if h is not None]
    heaviest = lambda cs: max(cs, key=lambda c: c["cycles"]) if cs else None
    paths = {
        "any": heaviest(costs(chunk_loops or innermost[:1])),
        "copy": heaviest(costs([l for l in chunk_loops if holds(l, wide_load)])),
        "gather": heaviest(costs([l for l in chunk_loops if not holds(l, wide_load)])),
        # a first or last chunk of a row, element by element
        "partial": heaviest(costs(innermost, require=narrow_store)),
    }
    facts = {"longest": longest, "shortest": shortest, "inner_loops": inner,
             "static": sum(block_weight(code, blocks[k], keep) for k in body),
             "paths": {name: c for name, c in paths.items() if c is not None}}
    outer = [l for l in loops if body < l[1]]
    if outer:
        o_header, o_body, o_latches = outer[0]
        nested = set().union(*(l[1] for l in loops if l[1] < o_body))
        weight = lambda k: 0 if k in nested else block_weight(code, blocks[k], keep)
        hist = heaviest_path(code, blocks, o_header, o_body, o_latches, keep,
                             weight_of=weight)
        if hist is not None:
            facts["row_overhead"] = cost(hist, cycles)
        end = heaviest(costs([l for l in innermost if l[1] < o_body and not holds(l, wide_store)]))
        if end:
            facts["end_chunk"] = end
    return facts


def dense_chunk_loop(code: list[Instruction], is_store, keep, wide_store, wide_load, is_division,
                     cycles, lanes: int, narrow_load) -> dict | None:
    """The chunk loop of a dense walk (scatter_dense_kernel, interleave_dense_kernel):
    each thread takes `passes` aligned 16-byte chunks of dst's memory, 64 chunks
    apart, carrying its row's set-up and cursor from chunk to chunk. A pass
    advances the cursor; where the chunk starts in a later row it runs the
    set-up site (a conditional block of divisions: the row, its outer
    coordinates, the interleave's sources). Then one of:
    - `interior`: a chunk inside its row's interior, gathered as in the row
      walk and stored by one 16-byte store; `copy`: the same by one 16-byte
      load (a stride-1, aligned source);
    - `pieces`: any other chunk of rows at least a chunk long: the row's piece
      gathered with the other lanes masked and stored through the lane mask
      (store_lanes: one 16-byte store when every lane is written, else lane
      by lane); `rowend`: what a chunk that holds a row end adds to it: the
      next row's set-up (the set-up site again) and its piece;
    - `chunk`: a chunk of rows shorter than a chunk (or of a kernel without
      the two paths above) walks its elements in a kept loop
      (BWDCONV_NO_UNROLL): `chunk` counts the chunk loop through that loop
      without its crossing sites plus `lanes` times the loop's heaviest pass
      without them, `crossing` what a crossing site (the next row's set-up
      after an element that ends a row) adds to a pass.
    `setup` is what the set-up site adds to a pass.

    The paths are told apart by their blocks: the element loop (an inner
    loop without stores); the set-up sites (conditional blocks with
    divisions outside it); store_lanes (a block within two edges of a narrow
    store decides between the 16-byte and the lane-by-lane stores); the
    interior and copy regions (the blocks of their heaviest paths that not
    every pass runs). Each path is counted without the others' regions, so a
    warp (wave) whose lanes take several issues each once."""
    blocks, dom, loops = loops_with_stores(code, is_store)
    holds = lambda test, k: any(test(code[i]) for i in range(blocks[k].start, blocks[k].end))
    chunk_loops = [l for l in loops if any(holds(wide_store, k) for k in l[1])]
    if not chunk_loops:
        return None
    header, body, latches = chunk_loops[0]
    every_pass = lambda k: all(dom.dominates(k, l) for l in latches)
    inner = [l for l in natural_loops(blocks, dom)
             if l[1] < body and not any(holds(is_store, k) for k in l[1])]
    element_body = inner[0][1] if inner else set()
    outside = body - element_body
    # set-up sites: a conditional block of divisions and every block it dominates
    # short of the blocks every pass runs (its diamonds, and a row end's second piece)
    entries = {k for k in outside if holds(is_division, k) and not every_pass(k)}
    setups = {k for k in outside if not every_pass(k) and any(dom.dominates(d, k) for d in entries)}
    narrow = {k for k in body if holds(lambda i: is_store(i) and not wide_store(i), k)}
    near_narrow = {k for k in body
                   if any(s in narrow or any(t in narrow for t in blocks[s].succ) for s in blocks[k].succ)}
    loads16 = {k for k in body if holds(wide_load, k)}
    narrow_loads = {k for k in body if holds(narrow_load, k)}
    stores16 = {k for k in body if holds(wide_store, k)}
    path = lambda **kw: heaviest_path(code, blocks, header, body, latches, keep, **kw)
    facts = {"element_loop": bool(inner)}

    def region(required: set[int], **kw) -> tuple[dict | None, set[int]]:
        """A path through one of `required` and its region: the blocks on it that
        the first block not every pass runs, among those dominating the required
        block it passes, dominates (on AMD, where a region's skip edges let one
        path run on through the next regions, only its own)."""
        on: list[int] = []
        hist = path(path_out=on, require=required, **kw)
        if hist is None:
            return None, set()
        on.reverse()  # header first
        hit = next(k for k in on if k in required)
        top = next(k for k in on if not every_pass(k) and dom.dominates(k, hit))
        return hist, {k for k in on if dom.dominates(top, k)}

    def clear_of(blocks_of: set[int], required: set[int]) -> set[int]:
        """Another region's blocks less those a path through `required` may need:
        the blocks that dominate one of them and the blocks after them (joins)."""
        after, stack = set(), list(required)
        while stack:
            for t in blocks[stack.pop()].succ:
                if t in body and t != header and t not in after:
                    after.add(t)
                    stack.append(t)
        return {k for k in blocks_of - after if not any(dom.dominates(k, r) for r in required)}

    kinds = {"interior": dict(required=stores16, forbid=narrow | near_narrow | loads16 | element_body),
             "copy": dict(required=loads16, forbid=narrow | near_narrow | element_body | narrow_loads)}
    own: set[int] = set()  # the blocks of the interior and copy regions
    for name, kw in kinds.items():
        hist, blocks_of = region(sites=setups, times=0, **kw)
        if hist is not None:
            facts[name] = cost(hist, cycles)
            own |= blocks_of
    # the set-up site on the interior (else copy) path: what entering it adds
    base = "interior" if "interior" in facts else "copy" if "copy" in facts else None
    with_setup = region(sites=setups, times=1, **kinds[base])[0] if base else None
    if with_setup is not None:
        one = cost(with_setup, cycles)
        facts["setup"] = {key: one[key] - facts[base][key] for key in one}
    piece_forbid = clear_of(own, near_narrow) | element_body | loads16 | narrow
    pieces, pieces_blocks = region(near_narrow, forbid=piece_forbid, sites=setups, times=0)
    if pieces is not None:
        facts["pieces"] = cost(pieces, cycles)
        # the row end's set-up site lies in the pieces' region, the pass's own before it
        row_end = setups & pieces_blocks | {k for k in setups if any(dom.dominates(t, k) for t in pieces_blocks)}
        rowend = region(near_narrow, forbid=piece_forbid | (setups - row_end), sites=row_end, times=1)[0]
        if rowend is not None:
            one = cost(rowend, cycles)
            facts["rowend"] = {key: one[key] - facts["pieces"][key] for key in one}
    if inner:
        e_header, e_body, e_latches = inner[0]
        crossing = {k for k in e_body if holds(is_division, k)}
        weight = lambda k: 0 if k in e_body else block_weight(code, blocks[k], keep)
        walk_forbid = clear_of(own | pieces_blocks, {e_header}) | loads16 | narrow
        walk = [path(weight_of=weight, require={e_header}, forbid=walk_forbid, sites=setups, times=t)
                for t in (0, 1)]
        element = [heaviest_path(code, blocks, e_header, e_body, e_latches, keep,
                                 sites=crossing, times=t) for t in (0, 1)]
        if walk[0] is not None and element[0] is not None:
            chunk = add_histograms(walk[0], element[0], lanes)
            facts["chunk"] = cost(chunk, cycles)
            if element[1] is not None:
                one = cost(add_histograms(chunk, element[1], 1, element[0]), cycles)
                facts["crossing"] = {key: one[key] - facts["chunk"][key] for key in one}
            if "setup" not in facts and walk[1] is not None:  # a kernel whose chunks all walk
                one, none = cost(walk[1], cycles), cost(walk[0], cycles)
                facts["setup"] = {key: one[key] - none[key] for key in one}
    return facts


def staged_tile_loop(code: list[Instruction], is_store, keep, wide_store, is_barrier,
                     cycles) -> dict | None:
    """The tile loop of a staged walk (scatter_staged_kernel, interleave_staged_kernel:
    staged_walk.h): every warp (wave) of a block passes it once per tile. Before
    its first barrier, the warps whose threads describe the tile's (row,
    residue) sources take the `sources` region (the blocks there that not
    every pass runs); then every warp stages its elements and stores its
    16-byte chunks. `tile` is the heaviest pass without the sources and
    without the narrow stores of dst's first and last chunk, `sources` what
    the sources add to it."""
    blocks, dom, loops = loops_with_stores(code, is_store)
    holds = lambda test, k: any(test(code[i]) for i in range(blocks[k].start, blocks[k].end))
    tile_loops = [l for l in loops if any(holds(wide_store, k) for k in l[1])]
    if not tile_loops:
        return None
    header, body, latches = tile_loops[-1]
    barriers = [i for k in body for i in range(blocks[k].start, blocks[k].end) if is_barrier(code[i])]
    if not barriers:
        return None
    every_pass = lambda k: all(dom.dominates(k, l) for l in latches)
    sources = {k for k in body if not every_pass(k) and blocks[k].start < min(barriers)}
    narrow = {k for k in body if holds(lambda i: is_store(i) and not wide_store(i), k)}
    path = lambda forbid: heaviest_path(code, blocks, header, body, latches, keep, forbid=forbid)
    tile, described = path(narrow | sources), path(narrow)
    if tile is None or described is None:
        return None
    facts = {"tile": cost(tile, cycles)}
    one = cost(described, cycles)
    facts["sources"] = {key: one[key] - facts["tile"][key] for key in one}
    return facts


def add_histograms(base: dict[str, int], more: dict[str, int], times: int,
                   less: dict[str, int] | None = None) -> dict[str, int]:
    """base + times x (more - less)."""
    out = dict(base)
    for op, n in more.items():
        out[op] = out.get(op, 0) + times * n
    for op, n in (less or {}).items():
        out[op] = out.get(op, 0) - times * n
    return out


def cost(hist: dict[str, int], cycles) -> dict:
    return {"instructions": sum(hist.values()), "cycles": cycles(hist)}


# ---------------------------------------------------------------------------
# NVIDIA: ptxas -v and SASS
# ---------------------------------------------------------------------------
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


# ---------------------------------------------------------------------------
# AMD: assembly and metadata
# ---------------------------------------------------------------------------
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


# ---------------------------------------------------------------------------
# Occupancy
# ---------------------------------------------------------------------------
def sm90_occupancy(registers: int, smem: int, threads: int = THREADS_PER_BLOCK) -> dict:
    d = H100
    warps = math.ceil(threads / d["warp"])
    regs_per_warp = math.ceil(max(registers, 1) * d["warp"] / d["register_unit"]) * d["register_unit"]
    by_regs = d["registers_per_unit"] // (regs_per_warp * warps)
    by_smem = d["shared_per_unit"] // (smem + d["shared_reserved_per_block"])
    by_warps = d["max_warps_per_unit"] // warps
    blocks = min(by_regs, by_smem, by_warps, d["max_blocks_per_unit"])
    limiter = min((("registers", by_regs), ("shared memory", by_smem), ("warps", by_warps),
                   ("blocks", d["max_blocks_per_unit"])), key=lambda kv: kv[1])[0]
    return {"blocks": blocks, "occupancy": blocks * warps / d["max_warps_per_unit"], "limiter": limiter}


def gfx940_occupancy(vgpr: int, agpr: int, lds: int, threads: int = THREADS_PER_BLOCK) -> dict:
    d = MI300X
    granule = d["vgpr_granule"]
    # unified file: AGPRs follow the VGPRs, each rounded to the granule
    regs = math.ceil(max(vgpr, 1) / granule) * granule + math.ceil(agpr / granule) * granule
    by_regs = min(d["max_waves_per_simd"], d["vgprs_per_simd_lane"] // regs)
    waves_per_group = math.ceil(threads / d["wave"])  # spread over the CU's 4 SIMDs
    groups_by_lds = d["lds_per_unit"] // lds if lds else 1 << 30
    by_lds = min(d["max_waves_per_simd"], groups_by_lds * waves_per_group // d["simds_per_unit"])
    waves = min(by_regs, by_lds)
    limiter = "VGPRs" if by_regs <= by_lds else "LDS"
    if waves == d["max_waves_per_simd"]:
        limiter = "waves"
    return {"waves_per_simd": waves, "occupancy": waves / d["max_waves_per_simd"], "limiter": limiter}


# ---------------------------------------------------------------------------
# Compiling
# ---------------------------------------------------------------------------
def compile_nv(tools: Tools, source: Path, arch: str, work: Path) -> dict:
    cubin = work / f"{source.stem}.{arch}.cubin"
    result = run([tools.nvcc, *NVCC_FLAGS, f"-arch={arch}", "-cubin", "-Xptxas", "-v",
                  f"-I{ROOT / 'csrc'}", str(source), "-o", str(cubin)])
    resources = parse_ptxas(result.stderr + result.stdout)
    sass = {}
    if tools.cuobjdump:
        listing = run([tools.cuobjdump, "-sass", str(cubin)], env=tools.cuobjdump_env()).stdout
        (work / f"{source.stem}.{arch}.sass").write_text(listing)
        sass = parse_sass(listing)
    return {"resources": resources, "sass": sass}


def compile_amd(tools: Tools, source: Path, arch: str, work: Path) -> dict:
    asm_path = work / f"{source.stem}.{arch}.s"
    run([tools.hipcc, *HIPCC_FLAGS, f"--offload-arch={arch}", "--cuda-device-only", "-S",
         f"-I{ROOT / 'csrc'}", str(source), "-o", str(asm_path)])
    asm = asm_path.read_text()
    return {"metadata": parse_amd_metadata(asm), "code": parse_amd_code(asm)}


def role_of(source: str) -> str:
    if source in DATA_MOVEMENT_SOURCES:
        return "data_movement"
    if source in SPLITK_SOURCES:
        return "splitk"
    return "other"


def collect(tools: Tools, work: Path, jobs: int) -> list[dict]:
    sources = sorted(KERNEL_DIR.glob("*.cu"))
    tasks = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        for source in sources:
            if tools.nvcc:
                for arch in NV_ARCHS:
                    tasks[(source.name, arch)] = pool.submit(compile_nv, tools, source, arch, work)
            if tools.hipcc:
                for arch in AMD_ARCHS:
                    tasks[(source.name, arch)] = pool.submit(compile_amd, tools, source, arch, work)
        results = {key: f.result() for key, f in tasks.items()}

    mangled = set()
    for (_, arch), r in results.items():
        mangled.update(r["resources"] if arch.startswith("sm_") else r["metadata"])
    names = demangle(sorted(mangled), tools.cxxfilt)

    kernels: dict[tuple[str, str], dict] = {}
    for (source, arch), r in sorted(results.items()):
        table = r["resources"] if arch.startswith("sm_") else r["metadata"]
        for symbol, res in table.items():
            name = short_name(names.get(symbol, symbol))
            k = kernels.setdefault((source, name), {"source": source, "kernel": name,
                                                    "role": role_of(source), "targets": {}})
            entry = {"symbol": symbol}
            if arch.startswith("sm_"):
                entry.update(res)
                code = r["sass"].get(symbol)
                if code is not None:
                    entry.update(nv_code_facts(code, k["role"], dense_lanes(name), staged_kernel(name)))
            else:
                entry.update(res)
                code = r["code"].get(symbol)
                if code is not None:
                    entry.update(amd_code_facts(code, k["role"], dense_lanes(name), staged_kernel(name)))
            k["targets"][arch] = entry
    return list(kernels.values())


def staged_kernel(kernel: str) -> bool:
    return re.match(r"\w+_staged_kernel<", kernel) is not None


def dense_lanes(kernel: str) -> int | None:
    """Elements per 16-byte chunk of a dense-walk kernel (`<name>_dense_kernel<Bits, ...>`),
    None for any other kernel."""
    m = re.match(r"\w+_dense_kernel<([^,>]+)", kernel)
    bytes_of = {name: size for size, name in BITS_NAMES.items()}
    return 16 // bytes_of[m.group(1)] if m and m.group(1) in bytes_of else None


def nv_code_facts(code: list[Instruction], role: str, dense: int | None = None,
                  staged: bool = False) -> dict:
    ops = [ins.opcode.split(".")[0] for ins in code]
    facts = {"instructions": sum(1 for ins in code if sass_keep(ins)),
             "tensor_core_instructions": sum(1 for op in ops if op in SASS_TENSOR),
             "local_memory_instructions": sum(1 for op in ops if op in ("LDL", "STL"))}
    wide_store = lambda i: sass_is_store(i) and i.opcode.endswith(".128")
    # a global load, or a generic one (a pointer read from a parameter array)
    wide_load = lambda i: i.opcode.split(".")[0] in ("LDG", "LD") and i.opcode.endswith(".128")
    cycles = lambda h: sass_cycles_per_iteration(h)[0]
    if role == "data_movement" and staged:
        facts["staged_loop"] = staged_tile_loop(code, sass_is_store, sass_keep, wide_store,
                                                lambda i: i.opcode.startswith("BAR"), cycles)
    elif role == "data_movement" and dense:
        narrow_load = lambda i: i.opcode.split(".")[0] in ("LDG", "LD") and not i.opcode.endswith(".128")
        facts["dense_loop"] = dense_chunk_loop(code, sass_is_store, sass_keep, wide_store, wide_load,
                                               lambda i: i.opcode.startswith("IMAD.HI"), cycles, dense,
                                               narrow_load)
    elif role == "data_movement":
        facts["loop"] = per_element_loop(code, sass_is_store, sass_keep, wide_store, wide_load, cycles)
    return facts


def amd_code_facts(code: list[Instruction], role: str, dense: int | None = None,
                   staged: bool = False) -> dict:
    facts = {"instructions": sum(1 for ins in code if amd_keep(ins)),
             "mfma_instructions": sum(1 for ins in code if ins.opcode.startswith("v_mfma")),
             "scratch_instructions": sum(1 for ins in code if ins.opcode.startswith("scratch_")
                                         or re.match(r"buffer_(load|store)", ins.opcode) is not None)}
    wide_store = lambda i: amd_is_store(i) and i.opcode.endswith("dwordx4")
    wide_load = lambda i: re.match(r"(global|buffer|flat)_load_dwordx4", i.opcode) is not None
    cycles = lambda h: amd_cycles_per_iteration(h)[0]
    if role == "data_movement" and staged:
        facts["staged_loop"] = staged_tile_loop(code, amd_is_store, amd_keep, wide_store,
                                                lambda i: i.opcode == "s_barrier", cycles)
    elif role == "data_movement" and dense:
        narrow_load = lambda i: re.match(r"(global|buffer|flat)_load_(?!dwordx4)", i.opcode) is not None
        facts["dense_loop"] = dense_chunk_loop(code, amd_is_store, amd_keep, wide_store, wide_load,
                                               lambda i: i.opcode.startswith(("v_mul_hi_u32", "s_mul_hi_u32")),
                                               cycles, dense, narrow_load)
    elif role == "data_movement":
        facts["loop"] = per_element_loop(code, amd_is_store, amd_keep, wide_store, wide_load, cycles)
    return facts


# ---------------------------------------------------------------------------
# Model: the seed lines' data movement on H100 and MI300X
# ---------------------------------------------------------------------------
@dataclass
class SeedLine:
    number: int
    n: int
    c: int
    h: int
    w: int
    k: int
    y: int
    x: int
    pad: tuple[int, int]
    stride: tuple[int, int]
    groups: int
    direction: int
    text: str

    def output(self) -> tuple[int, int]:
        return tuple((i + 2 * p - f) // s + 1 for i, p, f, s in
                     zip((self.h, self.w), self.pad, (self.y, self.x), self.stride))


def read_seeds() -> list[SeedLine]:
    lines = []
    for text in SEEDS.read_text().splitlines():
        if not text.strip() or text.startswith("#"):
            continue
        args = text.split()[1:]
        opts = {args[i]: int(args[i + 1]) for i in range(0, len(args) - 1, 2)}
        lines.append(SeedLine(len(lines) + 1, opts["-n"], opts["-c"], opts["-H"], opts["-W"],
                              opts["-k"], opts["-y"], opts["-x"], (opts["-p"], opts["-q"]),
                              (opts["-u"], opts["-v"]), opts.get("-g", 1), opts["-F"], text))
    return lines


def kernel_configurations(line: SeedLine, element_bytes: int, layout: str) -> list[dict]:
    """The data-movement launches of a seed line's input gradient: elements written
    and read, and the rows of dst's contiguous dim they are walked in (W in NCHW,
    channels in channels_last; dx and the scatter buffer are dense)."""
    if line.direction != 2:
        return []
    (oh, ow), (sh, sw) = line.output(), line.stride
    dx = line.n * line.c * line.h * line.w
    nchw = layout == "nchw"
    # interleave: every dx element written once; Copy slots also read one element.
    # 1x1 (swap1x1): only the slots the small result covers are read (N*C*Ho*Wo);
    # otherwise every phase with taps is read, which covers dx.
    read = line.n * line.c * oh * ow if (line.y, line.x) == (1, 1) else dx
    interleave = {"kernel": "interleave", "written": dx, "read": read,
                  "row_length": line.w if nchw else line.c, "row_step": sw if nchw else 1,
                  "channels": line.c}
    # scatter: the zero-inserted, padded grad_output, read once where it holds values.
    hb, wb = line.h + line.y - 1, line.w + line.x - 1
    scatter = {"kernel": "scatter", "written": line.n * line.k * hb * wb,
               "read": line.n * line.k * oh * ow, "row_length": wb if nchw else line.k,
               "row_step": sw if nchw else 1, "channels": line.k}
    if nchw:
        # a row of W that holds values (oh of the hb rows) has them from its lead
        # on, every sw-th, up to its reach: its interior (scatter.cu, row_interior)
        lead = line.x - 1 - line.pad[1]
        reach = lead + sw * (ow - 1) + 1
        scatter.update(row_head=max(lead, 0), row_tail=max(wb - reach, 0), live_rows=oh / hb)
    if not nchw:  # the dim a staged walk's packet rows run along (staged_rows)
        interleave.update(along=line.w, along_step=sw)
    for config in (interleave, scatter):
        config["element_bytes"] = element_bytes
        # dims outside the row: NCHW merges batch and channels (both dense) and
        # keeps the other spatial dims; channels_last keeps batch and every spatial dim
        config["outer_dims"] = 2 if nchw else 3
        # every row starts 16-byte aligned when a row's bytes are a multiple of 16
        config["rows_aligned"] = config["row_length"] * element_bytes % 16 == 0
        # dst is dense in walk order (the ops allocate dx and the scatter buffer),
        # so the host takes the dense walk where the kernel has one and the
        # element count stays narrow (make_scatter_walk)
        config["dense"] = config["written"] + 2 * 16 // element_bytes < 2 ** 31
    return [interleave, scatter]


BITS_NAMES = {2: "unsigned short", 4: "unsigned int", 8: "unsigned long", 16: "Bits128"}


def lanes_per_row(chunks: int, row_bytes: int) -> int:
    """Threads sharing a row (hip/layout.cpp, make_row_walk): a power of two
    up to 32 that gives each thread about 4 chunks, two for rows of 32 bytes or more."""
    lanes = 2 if row_bytes >= 32 else 1
    while lanes < 32 and lanes * 8 <= chunks:
        lanes *= 2
    return lanes


def row_walk_cost(config: dict, loop: dict, lanes_per_warp: int) -> tuple[float, float, float] | None:
    """(warp instructions, warp cycles, elements) of one warp of a row-walk kernel:
    lanes_per_warp / L rows, each thread paying the row overhead once and one
    chunk path per chunk, the partial path for the first and last chunk."""
    vector = 16 // config["element_bytes"]
    chunks = -(-(config["row_length"] + vector - 1) // vector)
    lanes = lanes_per_row(chunks, config["row_length"] * config["element_bytes"])
    iterations = -(-chunks // lanes)
    paths = loop["paths"]
    # channels_last rows (step 1) of 16-byte multiples copy; others gather
    steady = paths.get("copy") if config["row_step"] == 1 and config["rows_aligned"] else None
    steady = steady or paths.get("gather") or paths["any"]
    # rows that start 16-byte aligned and whose source spans them (channels_last)
    # have no end chunk; others are charged two (first and last)
    ends = 0 if config["rows_aligned"] and config["row_step"] == 1 else 2
    overhead, end = loop["row_overhead"], loop.get("end_chunk", steady)
    instructions = overhead["instructions"] + iterations * steady["instructions"] + \
        ends * end["instructions"]
    cycles = overhead["cycles"] + iterations * steady["cycles"] + ends * end["cycles"]
    return instructions, cycles, lanes_per_warp / lanes * config["row_length"]


RUN_LANES = 64            # launch.h kRunLanes: a thread's next chunk lies this many chunks on
RUN_GROUPS = 16384        # launch.h kRunGroups
MAX_RUN_PASSES = 64       # launch.h kMaxRunPasses


def dense_passes(chunks: int) -> int:
    """Chunks per thread of a dense walk over `chunks` chunks (launch.h, dense_passes)."""
    return min(max(-(-chunks // (RUN_LANES * RUN_GROUPS)), 1), MAX_RUN_PASSES)


def dense_walk_cost(config: dict, loop: dict, lanes_per_warp: int) -> tuple[float, float, float]:
    """The same for a dense walk (dense_chunk_loop): per pass a warp (wave) issues
    each path one of its lanes takes once (SIMT): `setup` where a lane's chunk
    starts in a later row than its last one left it in (every lane on a
    thread's first pass), `interior` (`copy` for channels_last rows whose bytes
    are a multiple of 16), `pieces` and `rowend`, `chunk` and `crossing` once
    per element position at which a walking lane ends a row (run_shares),
    averaged over the passes of the buffer (dst 16-byte aligned). A row's
    interior is taken as the whole row but for scatter's NCHW rows that hold
    values (row_head, row_tail: the zeros before the first and after the last);
    the interleave's may end earlier where a result's values do. Paths whose
    regions several lanes of a warp take are each counted whole (their shared
    loop overhead twice)."""
    lanes = 16 // config["element_bytes"]
    copies = config["row_step"] == 1 and config["rows_aligned"]
    interior = loop.get("copy") if copies and "copy" in loop else loop.get("interior")
    passes = dense_passes(-(-config["written"] // lanes))
    shares = run_shares(config["row_length"], lanes, lanes_per_warp, passes, interior is not None,
                        "pieces" in loop)
    if config.get("row_head") or config.get("row_tail"):
        # rows that hold values have an interior short of their ends (scatter):
        # the warps over them, mixed in by their share of the rows
        live = config["live_rows"]
        edged = run_shares(config["row_length"], lanes, lanes_per_warp, passes, interior is not None,
                           "pieces" in loop, config["row_head"], config["row_tail"])
        shares = {key: live * edged[key] + (1 - live) * shares[key] for key in shares}
    paths = {"setup": loop.get("setup"), "interior": interior, "pieces": loop.get("pieces"),
             "rowend": loop.get("rowend"), "walking": loop.get("chunk"), "crossings": loop.get("crossing")}
    missing = [name for name, path in paths.items() if path is None and shares[name] > 0]
    if missing:
        raise ValueError(f"no {', '.join(missing)} path found for a walk that takes it")
    total = lambda key: sum(shares[name] * path[key] for name, path in paths.items() if path)
    return total("instructions"), total("cycles"), lanes_per_warp * lanes


def run_shares(row_length: int, lanes: int, width: int, passes: int, interior: bool, pieces: bool,
               head: int = 0, tail: int = 0, samples: int = 4096) -> dict[str, float]:
    """Over the passes of warps (waves) of `width` consecutive chunks of a dense
    dst in runs (16-byte aligned, as the caching allocators give it; chunk c
    holds elements c * lanes ... c * lanes + lanes - 1; rows start at the
    elements m * row_length; a lane's previous chunk lies RUN_LANES chunks
    back): the share of passes in which some lane takes each path, and the
    mean number of element positions at which a walking lane ends a row
    (`crossings`). A chunk is `interior` (the kernel has that path) when it
    lies inside a row's interior (which leaves out the row's first `head` and
    last `tail` elements), else `pieces` (the kernel has that path, rows at
    least a chunk long), `rowend` too when it runs past its row's end, else it
    walks. A lane sets up (`setup`) where its chunk's first element lies in
    another row than its previous chunk left it in (an interior chunk: its own
    row; pieces: the row of its last element; a walked chunk: the row of the
    element after it), and on a thread's first pass (1 / passes of them). The
    pattern repeats after row_length / gcd(row_length, width x lanes) warps;
    longer periods are sampled evenly."""
    L = row_length
    span = width * lanes
    period = L // math.gcd(L, span)
    warps = range(period) if period <= samples else [i * period // samples for i in range(samples)]
    skip = -(-RUN_LANES // width) * period  # whole periods: every previous chunk lies in dst

    def chunk(c: int) -> tuple[str, int, int]:
        """The path chunk c takes, its first element's row and the row it leaves."""
        first = c * lanes
        row, at = divmod(first, L)
        if interior and at >= head and at + lanes <= L - tail:
            return "interior", row, row
        if pieces and L >= lanes:
            return ("rowend" if at + lanes > L else "pieces"), row, row + (at + lanes > L)
        return "walking", row, (first + lanes) // L

    names = ("setup", "interior", "pieces", "rowend", "walking", "crossings")
    shares = dict.fromkeys(names, 0.0)
    for w in warps:
        base = (skip + w) * width
        taken = [chunk(c) for c in range(base, base + width)]
        before = [chunk(c - RUN_LANES) for c in range(base, base + width)]
        paths = {path for path, _, _ in taken}
        shares["setup"] += any(row != left for (_, row, _), (_, _, left) in zip(taken, before))
        shares["interior"] += "interior" in paths
        shares["pieces"] += bool(paths & {"pieces", "rowend"})
        shares["rowend"] += "rowend" in paths
        shares["walking"] += "walking" in paths
        ends = {e for c, (path, _, _) in zip(range(base, base + width), taken) if path == "walking"
                for e in range(lanes) if (c * lanes + e + 1) % L == 0}
        shares["crossings"] += len(ends)
    shares = {key: value / len(warps) for key, value in shares.items()}
    # a thread's first pass sets every lane up
    shares["setup"] = (1 + (passes - 1) * shares["setup"]) / passes
    return shares


STAGED_TILE_BYTES = 8192  # launch.h kStagedTileBytes: dst bytes a block stages per tile
STAGED_SOURCES = 256      # launch.h kStagedSources: (row, residue) sources a tile may span


def staged_rows(config: dict) -> tuple[int, int] | None:
    """The rows a staged walk takes a dense dst in, as (elements per row, step of the
    dim along them), or None where the host keeps the dense walk (hip/layout.cpp):
    stride-2 rows of a chunk or more whose tile spans at most STAGED_SOURCES sources
    (staged_rows_fit); or, for the interleave's channels_last rows shorter than a
    chunk, rows along W of stride 2 whose positions are packets of the channels
    (stages_packets; the seed lines' results are dense, so their rows are stride-1
    runs and their packets whole)."""
    size, step = config["row_length"], config["row_step"]
    lanes = 16 // config["element_bytes"]
    if step == 1 and size < lanes and config["kernel"] == "interleave" and "along" in config:
        size, step = size * config["along"], config["along_step"]
    tile = STAGED_TILE_BYTES // config["element_bytes"]
    span = (tile + size - 2) // size + 1
    fits = step == 2 and size >= lanes and span * step <= STAGED_SOURCES
    return (size, step) if fits else None


def staged_rows_fit(config: dict) -> bool:
    return staged_rows(config) is not None


def staged_walk_cost(config: dict, loop: dict, lanes_per_warp: int) -> tuple[float, float, float]:
    """The same for a staged walk (staged_tile_loop), per warp (wave) and tile: its
    `tile` pass, and the `sources` region for the warps whose threads describe
    the tile's rows (staged_rows: their elements, and a source per residue of
    the dim along them; one thread per source, so ceil(sources / lanes)
    warps), averaged over where in its row a tile starts; a warp stages
    tile / warps per block elements."""
    tile = STAGED_TILE_BYTES // config["element_bytes"]
    warps = THREADS_PER_BLOCK // lanes_per_warp
    size, step = staged_rows(config)
    describing = sum(math.ceil(((start + tile - 1) // size + 1) * step / lanes_per_warp)
                     for start in range(size)) / size
    total = lambda key: loop["tile"][key] + describing / warps * loop["sources"][key]
    return total("instructions"), total("cycles"), tile / warps


def element_walk_cost(config: dict, loop: dict, lanes_per_warp: int) -> tuple[float, float, float]:
    """The same for a kernel with one loop over elements (or channel packets)."""
    packet = packet_elements(config)
    any_path = loop["paths"]["any"]
    return any_path["instructions"], any_path["cycles"], lanes_per_warp * packet


def packet_elements(config: dict) -> int:
    """Channels moved as one element by an element-walk kernel (channels_last only)."""
    if config["row_step"] != 1 or config["row_length"] != config["channels"]:
        return 1
    k = 16 // config["element_bytes"]
    while k > 1 and config["channels"] % k:
        k //= 2
    return k


def instantiation_for(config: dict, kernels: dict[str, dict]) -> str | None:
    """The instantiation the host side launches for a configuration: the dense
    walk (`<kernel>_dense_kernel<Bits, Index, outer dims>`) for a dense dst when
    the source defines one, else the row walk, else the element walk."""
    index = "int" if config["written"] < 2 ** 31 else "long"
    step = config["row_step"] if config["row_step"] in (1, 2) else 0
    # scatter's is <Bits, Index, step, outer dims>, interleave's <..., packets> too
    packets = {"interleave": ", true>" if config["row_step"] == 1 else ", false>", "scatter": ">"}
    staged = f"{config['kernel']}_staged_kernel<{BITS_NAMES[config['element_bytes']]}, {index}, " \
        f"2, {config['outer_dims']}{packets[config['kernel']]}"
    if config.get("dense") and staged_rows_fit(config) and staged in kernels:
        return staged
    # scatter's is <Bits, Index, outer dims>, interleave's <Bits, Index, step, outer dims>
    for dense in (f"{config['kernel']}_dense_kernel<{BITS_NAMES[config['element_bytes']]}, {index}, "
                  f"{args}>" for args in (config["outer_dims"], f"{step}, {config['outer_dims']}")):
        if config.get("dense") and dense in kernels:
            return dense
    row_walk = f"{config['kernel']}_kernel<{BITS_NAMES[config['element_bytes']]}, {index}, " \
        f"{config['row_step'] if config['row_step'] in (1, 2) else 0}, {config['outer_dims']}>"
    if row_walk in kernels:
        return row_walk
    bits = BITS_NAMES[config["element_bytes"] * packet_elements(config)]
    element_walk = f"{config['kernel']}_kernel<{bits}, {index}>"
    return element_walk if element_walk in kernels else None


def model_configuration(config: dict, kernels: dict[str, dict]) -> dict:
    name = instantiation_for(config, kernels)
    out = {"instantiation": name}
    bytes_per_element = config["element_bytes"] * (config["written"] + config["read"]) / config["written"]
    for device in DEVICES:
        t = kernels[name]["targets"].get(device["arch"], {}) if name else {}
        loop = t.get("staged_loop") or t.get("dense_loop") or t.get("loop")
        if not loop:
            out[device["name"]] = None
            continue
        width = device["lanes_per_scheduler"] if device is H100 else device["wave"]
        kind = "staged" if t.get("staged_loop") else "dense" if t.get("dense_loop") else \
            "rows" if "row_overhead" in loop else "elements"
        out["walk"] = kind
        walk = {"staged": staged_walk_cost, "dense": dense_walk_cost, "rows": row_walk_cost,
                "elements": element_walk_cost}[kind]
        instructions, cycles, elements = walk(config, loop, width)
        issuers = device["units"] * (device["schedulers_per_unit"] if device is H100
                                     else device["simds_per_unit"])
        element_rate = issuers * device["clock_hz"] * elements / cycles
        issue_bytes = element_rate * bytes_per_element
        out[device["name"]] = {
            "instructions_per_element": width * instructions / elements,
            "cycles_per_warp": cycles,
            "elements_per_warp": elements,
            "issue_bound_tb_s": issue_bytes / 1e12,
            "fraction_of_hbm": issue_bytes / device["hbm_bytes_per_s"],
            "modelled_tb_s": min(issue_bytes, device["hbm_bytes_per_s"]) / 1e12,
        }
    out["bytes_per_element"] = bytes_per_element
    return out


def model(kernels: list[dict]) -> list[dict]:
    by_name = {k["kernel"]: k for k in kernels if k["role"] == "data_movement"}
    rows = []
    for line in read_seeds():
        for eb in (2, 4):
            for layout in ("nchw", "channels_last"):
                for config in kernel_configurations(line, eb, layout):
                    row = {"line": line.number, "layout": layout, **config}
                    row.update(model_configuration(config, by_name))
                    rows.append(row)
    return rows


# ---------------------------------------------------------------------------
# splitk on seed 001's line (modelled)
# ---------------------------------------------------------------------------
# The kernel path of csrc/ops/splitk.cpp: pad the input once (where padding is
# non-zero), then per step one strided copy stages every chunk's input window
# as columns and one batched GEMM per offset tap multiplies grad_output by them
# into fp32 partials, then the reduce kernel sums the partials in chunk order.
# Time = (pad + staging + partials) bytes / HBM + max(GEMM flops / (fraction x
# dense 16-bit peak x the share of units one wave of chunk tiles fills),
# grad_output bytes / HBM). Launch overhead is not modelled. Assumed: a step's buffers are
# read back from the last-level cache right after being written (the staged
# columns by the GEMMs, the window by the staging copy) and the later tap
# GEMMs of a step find its grad_output slice and staged columns there too;
# `no_reuse_us` counts every one of those reads from HBM instead.
SPLITK_GEMM_FRACTION_OF_PEAK = 0.5  # assumed for cuBLAS / hipBLASLt on one 64 x 48 tile per chunk


def compile_splitk_layout(work: Path) -> Path | None:
    """scripts/splitk_layout.cpp with the planner (csrc/dispatch), for the planner's own layout."""
    cxx = shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")
    if cxx is None:
        return None
    binary = work / "splitk_layout"
    run([cxx, "-std=c++17", "-O1", f"-I{ROOT / 'csrc'}", str(ROOT / "scripts" / "splitk_layout.cpp"),
         *map(str, sorted((ROOT / "csrc" / "dispatch").glob("*.cpp"))), "-o", str(binary)])
    return binary


def seed_dilation(line: SeedLine) -> tuple[int, int]:
    args = line.text.split()[1:]
    opts = {args[i]: int(args[i + 1]) for i in range(0, len(args) - 1, 2)}
    return opts.get("-l", 1), opts.get("-j", 1)


def splitk_layout_for(binary: Path, line: SeedLine, units: int, staged_bytes: int) -> dict:
    dil = seed_dilation(line)
    dims = [(line.h, line.y, line.stride[0], line.pad[0], dil[0]),
            (line.w, line.x, line.stride[1], line.pad[1], dil[1])]
    args = [str(binary), "2", str(line.n), str(line.c), str(line.k), str(line.groups), str(units),
            str(staged_bytes), "4"] + [str(v) for dim in dims for v in dim]
    return json.loads(run(args).stdout)


def splitk_step_groups(line: SeedLine, layout: dict) -> list[tuple[int, int]]:
    """(chunks, output rows) of each step group, in the order GemmSplitK::run takes them."""
    oh = line.output()[0]
    b, rows, step = layout["batch_per_chunk"], layout["rows_per_chunk"], layout["step_rows"]
    full, tail = oh // rows, oh - (oh // rows) * rows
    groups = []
    for j in range(b):
        batch_chunks = -(-(line.n - j) // b)
        for offset in range(0, rows, step):
            groups.append((batch_chunks * full, min(step, rows - offset)))
            if offset < tail:
                groups.append((batch_chunks, min(step, tail - offset)))
    return groups


def model_splitk(line: SeedLine, device: dict, layout: dict, element_bytes: int = 2) -> dict:
    (oh, ow), (sh, sw), (dh, dw) = line.output(), line.stride, seed_dilation(line)
    bw, peak = device["hbm_bytes_per_s"], device["dense_16bit_flops"]
    cin, cout, taps = line.c, line.k, line.y * line.x
    x_bytes = line.n * cin * line.h * line.w * element_bytes
    dy_bytes = line.n * cout * oh * ow * element_bytes
    weight = cout * (cin // line.groups) * taps
    # the padded input: every position a window reads
    hp, wp = (oh - 1) * sh + dh * (line.y - 1) + 1, (ow - 1) * sw + dw * (line.x - 1) + 1
    pad = x_bytes + line.n * cin * hp * wp * element_bytes if any(line.pad) else 0
    halo, staged_taps, offset_taps = layout["halo_rows"], layout["staged_taps"], layout["offset_taps"]
    groups = splitk_step_groups(line, layout)
    steps = len(groups)
    window_rows = (lambda r: r + halo) if offset_taps > 1 else (lambda r: (r - 1) * sh + dh * (line.y - 1) + 1)
    window = sum(ch * cin * window_rows(r) * wp for ch, r in groups) * element_bytes
    staged = sum(ch * cin * staged_taps * (r + halo) * ow for ch, r in groups) * element_bytes
    flops = 2 * weight * line.n * oh * ow
    partial_bytes = layout["chunks"] * weight * 4
    partials = 2 * partial_bytes + weight * element_bytes  # GEMM writes, reduce reads, result
    # the share of the device one wave of chunk tiles keeps busy
    tiles = layout["chunks"] * layout["tiles_per_chunk"]
    fill = tiles / (-(-tiles // device["units"]) * device["units"])
    gemm_flops_s = flops / (SPLITK_GEMM_FRACTION_OF_PEAK * peak * fill)
    gemm_s = max(gemm_flops_s, dy_bytes / bw)
    time_s = (pad + window + staged + partials) / bw + gemm_s
    # No reuse: every tap GEMM reads its grad_output slice and staged columns
    # from HBM, and every accumulation reads and writes its partials there.
    steps_per_chunk = layout["batch_per_chunk"] * -(-layout["rows_per_chunk"] // layout["step_rows"])
    no_reuse_bytes = (pad + window + staged + offset_taps * (staged + dy_bytes)
                      + partial_bytes * 2 * steps_per_chunk + weight * element_bytes)
    no_reuse_s = no_reuse_bytes / bw
    roofline_s = max((x_bytes + dy_bytes + weight * element_bytes) / bw, flops / peak)
    working_set = max(ch * cin * staged_taps * (r + halo) * ow * element_bytes
                      + ch * cout * r * ow * element_bytes for ch, r in groups)
    us = lambda seconds: round(seconds * 1e6, 1)
    mb = lambda b: round(b / 1e6, 1)
    return {
        "device": device["name"], "line": line.number, "element_bytes": element_bytes,
        "layout": layout, "step_groups": steps,
        "aten_calls": (1 if pad else 0) + steps * (1 + offset_taps) + 1,
        "bytes_mb": {"input": mb(x_bytes), "grad_output": mb(dy_bytes), "pad": mb(pad),
                     "window_reads": mb(window), "staged_writes": mb(staged),
                     "partials_write_read_and_result": mb(partials)},
        "gemm_gflop": round(flops / 1e9, 2), "gemm_fraction_of_peak": SPLITK_GEMM_FRACTION_OF_PEAK,
        "device_fill": round(fill, 3),
        "reduction_per_gemm": layout["step_rows"] * ow,
        "us": {"pad": us(pad / bw), "staging": us((window + staged) / bw),
               "gemm_flops": us(gemm_flops_s),
               "gemm_grad_output_reads": us(dy_bytes / bw), "gemm": us(gemm_s),
               "partials": us(partials / bw)},
        "partial_bytes": partial_bytes, "staging_cap_bytes": layout["staging_cap_bytes"],
        "step_working_set_mb": mb(working_set),
        "last_level_cache_mb": mb(device["last_level_cache_bytes"]),
        "modelled_us": us(time_s), "roofline_us": us(roofline_s),
        "times_roofline": round(time_s / roofline_s, 2),
        "no_reuse_us": us(no_reuse_s), "no_reuse_times_roofline": round(no_reuse_s / roofline_s, 2),
    }


def splitk_model(work: Path) -> list[dict]:
    lines = [l for l in read_seeds() if l.direction == 4]
    binary = compile_splitk_layout(work)
    if binary is None or not lines:
        return []
    return [model_splitk(line, device, splitk_layout_for(binary, line, device["units"], 2))
            for line in lines for device in DEVICES]


# ---------------------------------------------------------------------------
# Rules
# ---------------------------------------------------------------------------
def splitk_products_source() -> dict:
    """Where splitk's chunk products run, read from the sources. The vendor GEMM
    when csrc/ops/splitk.cpp sends GPU tensors to its kernel path (the class
    whose products call ATen's batched GEMM: aten::bmm / baddbmm, and their
    .dtype_out forms for fp16/bf16 operands with fp32 results, which run on
    cuBLAS / hipBLASLt) and csrc/hip/splitk.cu defines no kernel but the reduce."""
    ops = (ROOT / "csrc" / "ops" / "splitk.cpp").read_text()
    cu = (KERNEL_DIR / "splitk.cu").read_text()
    kernels = re.findall(r"__global__\s+void\s+(?:__launch_bounds__\([^)]*\)\s*)?(\w+)", cu)
    calls = sorted(set(m.group(0).rstrip("( ") for m in
                       re.finditer(r"at::(?:bmm|baddbmm)(?:_out)?\s*\(|\.baddbmm_\s*\(", ops)))
    widened = re.search(r"at::bmm_out\([^;]*scalar_type\(\)\)", ops) is not None
    gpu_path = re.search(r"if \(runs_kernels\(grad_output\)\)\s*return GemmSplitK\(", ops) is not None
    products = [k for k in kernels if "reduce" not in k]
    return {"gemm_calls": calls, "fp32_results_from_16bit_operands": widened,
            "gpu_tensors_take_the_gemm_path": gpu_path, "kernels": kernels,
            "product_kernels": products,
            "vendor_gemm": bool(calls) and gpu_path and not products}


ROLES = ("data_movement", "splitk")


def violations(kernels: list[dict], roles: tuple[str, ...] = ROLES) -> list[str]:
    """The rules broken by the kernels of `roles`."""
    found = []
    splitk_products = [k for k in kernels if k["role"] == "splitk" and "reduce" not in k["kernel"]]
    if "splitk" not in roles:
        splitk_products = []
    for k in kernels:
        if k["role"] not in roles:
            continue
        if k["role"] == "data_movement":
            found += occupancy_violations(k)
        for arch, t in k["targets"].items():
            where = f"{k['kernel']} [{arch}]"
            if arch.startswith("sm_"):
                if t.get("spill_stores", 0) or t.get("spill_loads", 0):
                    found.append(f"{where}: spills {t['spill_stores']} B stored, {t['spill_loads']} B loaded")
                if k["role"] == "data_movement" and t.get("stack", 0):
                    found.append(f"{where}: {t['stack']} B stack frame in a data-movement kernel")
            else:
                if t.get("vgpr_spill_count", 0) or t.get("sgpr_spill_count", 0):
                    found.append(f"{where}: spills {t['vgpr_spill_count']} VGPRs, {t['sgpr_spill_count']} SGPRs")
                if k["role"] == "data_movement" and t.get("private_segment_fixed_size", 0):
                    found.append(f"{where}: {t['private_segment_fixed_size']} B scratch in a data-movement kernel")
                declared = max((v.get("smem", 0) for a, v in k["targets"].items() if a.startswith("sm_")),
                               default=None)
                lds = t.get("group_segment_fixed_size", 0)
                if declared is not None and lds > declared:
                    found.append(f"{where}: {lds} B LDS, {lds - declared} B of it made by the compiler "
                                 f"(the kernel declares {declared} B)")
    for k in splitk_products:
        for arch, t in k["targets"].items():
            if arch.startswith("sm_") and not t.get("tensor_core_instructions"):
                found.append(f"{k['kernel']} [{arch}]: splitk products without HMMA/HGMMA instructions")
            if arch.startswith("gfx") and not t.get("mfma_instructions"):
                found.append(f"{k['kernel']} [{arch}]: splitk products without MFMA instructions")
    if "splitk" in roles and not splitk_products and not splitk_products_source()["vendor_gemm"]:
        found.append("splitk: no product kernel and no vendor GEMM call in csrc/ops/splitk.cpp")
    return found


def occupancy_violations(k: dict) -> list[str]:
    """A data-movement kernel below the modelled occupancy target on sm_90 or gfx940."""
    found = []
    nv, amd = k["targets"].get("sm_90"), k["targets"].get("gfx940")
    if nv:
        occ = sm90_occupancy(nv["registers"], nv["smem"])
        if occ["occupancy"] < OCCUPANCY_TARGET:
            found.append(f"{k['kernel']} [sm_90]: modelled occupancy {pct(occ['occupancy'])} "
                         f"({occ['limiter']}) below {pct(OCCUPANCY_TARGET)}")
    if amd:
        occ = gfx940_occupancy(amd["vgpr_count"], amd["agpr_count"], amd["group_segment_fixed_size"])
        if occ["occupancy"] < OCCUPANCY_TARGET:
            found.append(f"{k['kernel']} [gfx940]: modelled occupancy {pct(occ['occupancy'])} "
                         f"({occ['limiter']}) below {pct(OCCUPANCY_TARGET)}")
    return found


# ---------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------
def pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def occupancy_rows(kernels: list[dict]) -> list[dict]:
    rows = []
    for k in kernels:
        nv, amd = k["targets"].get("sm_90"), k["targets"].get("gfx940")
        row = {"kernel": k["kernel"], "role": k["role"]}
        if nv:
            row["sm_90"] = sm90_occupancy(nv["registers"], nv["smem"])
        if amd:
            row["gfx940"] = gfx940_occupancy(amd["vgpr_count"], amd["agpr_count"],
                                             amd["group_segment_fixed_size"])
        rows.append(row)
    return rows


def markdown(kernels, occupancy, rows, problems, tools, command, splitk=None) -> str:
    out = ["# csrc/hip kernels: static evidence (compiler output; GPU figures modelled)", "",
           "No GPU was used. Registers, stack, spills, LDS, scratch and instruction counts are read",
           "from the compilers' output; occupancy and throughput are **modelled** from those counts and",
           "the published device figures cited in `scripts/kernel_report.py`.", "",
           f"Command: `{command}`", "",
           f"Toolchain: {tools_line(tools)}", ""]
    out += ["## Resources", "",
            "| kernel | target | regs (NV) / VGPR+AGPR, SGPR (AMD) | stack / scratch B | spills | smem / LDS B | instructions | tensor/MFMA |",
            "|---|---|---|---|---|---|---|---|"]
    for k in kernels:
        for arch in NV_ARCHS + AMD_ARCHS:
            t = k["targets"].get(arch)
            if not t:
                continue
            if arch.startswith("sm_"):
                out.append(f"| {k['kernel']} | {arch} | {t['registers']} | {t['stack']} | "
                           f"{t['spill_stores']}+{t['spill_loads']} B | {t['smem']} | {t.get('instructions', '-')} | "
                           f"{t.get('tensor_core_instructions', '-')} |")
            else:
                out.append(f"| {k['kernel']} | {arch} | {t['vgpr_count']}+{t['agpr_count']}, {t['sgpr_count']} | "
                           f"{t['private_segment_fixed_size']} | {t['vgpr_spill_count']}+{t['sgpr_spill_count']} | "
                           f"{t['group_segment_fixed_size']} | {t.get('instructions', '-')} | "
                           f"{t.get('mfma_instructions', '-')} |")
    out += ["", "## Per-element loop of the data-movement kernels", "",
            "The innermost loop holding a global store (per element, or per 16-byte chunk of a row),",
            "found by its back-edge branch. Instructions on its heaviest paths (NOPs left out; a call",
            "counts its callee): `any` path; `gather` a whole chunk by one 16-byte store, elements loaded",
            "one by one; `copy` a whole chunk by one 16-byte load; `partial` a row's first or last chunk",
            "element by element. `row` is the loop around it, once per row and thread, the inner loop",
            "left out. Each entry: instructions / modelled cycles (H100: per warp on one scheduler;",
            "MI300X: per wave on one SIMD). `inner loops` > 0: the body holds loops of its own, each",
            "counted once, so the count is a lower bound.", "",
            "| kernel | target | any | gather | copy | partial | row | end chunk | inner loops |",
            "|---|---|---|---|---|---|---|---|---|"]
    for k in kernels:
        if k["role"] != "data_movement":
            continue
        for arch in NV_ARCHS + AMD_ARCHS:
            loop = k["targets"].get(arch, {}).get("loop")
            if not loop:
                continue
            cell = lambda c: f"{c['instructions']} / {c['cycles']}" if c else "-"
            paths = loop["paths"]
            out.append(f"| {k['kernel']} | {arch} | {cell(paths.get('any'))} | {cell(paths.get('gather'))} | "
                       f"{cell(paths.get('copy'))} | {cell(paths.get('partial'))} | "
                       f"{cell(loop.get('row_overhead'))} | {cell(loop.get('end_chunk'))} | "
                       f"{loop['inner_loops']} |")
    out += ["", "## Chunk loop of the dense walks", "",
            "A dense walk's threads each take `passes` aligned 16-byte chunks of dst's memory, 64",
            "chunks apart, carrying the row's set-up and cursor from chunk to chunk. Paths through",
            "the chunk loop (dense_chunk_loop), each without the others' regions: `setup`, what the",
            "row set-up adds to a pass (where a chunk starts in a later row than the thread's last",
            "one left it in); `interior`, a chunk inside its row's interior gathered as in the row",
            "walk, `copy` the same by one 16-byte load; `pieces`, a chunk of rows at least a chunk",
            "long that is not interior: its row's piece gathered with the other lanes masked and",
            "stored through the lane mask; `rowend`, what such a chunk adds when it holds a row end",
            "(the next row's set-up and piece); `chunk`, a chunk whose elements are walked one by",
            "one (rows shorter than a chunk, or a kernel without the paths above), the kept element",
            "loop counted `lanes` times, and `crossing`, what the next row's set-up inside that",
            "loop adds. Instructions / modelled cycles as above.", "",
            "| kernel | target | setup | interior | copy | pieces | rowend | chunk | crossing |",
            "|---|---|---|---|---|---|---|---|---|"]
    out += path_rows(kernels, "dense_loop",
                     ("setup", "interior", "copy", "pieces", "rowend", "chunk", "crossing"))
    out += ["", "## Tile loop of the staged walks", "",
            "A staged walk's block stages 8 KB of dst in shared memory per tile, then stores it in",
            "aligned 16-byte chunks (staged_walk.h); every warp passes its tile loop once per tile",
            "(staged_tile_loop): `tile`, the pass every warp takes (its elements staged, its chunks",
            "stored), and `sources`, what describing the tile's (row, residue) sources adds to the",
            "warps whose threads describe one. Instructions / modelled cycles as above.", "",
            "| kernel | target | tile | sources |", "|---|---|---|---|"]
    out += path_rows(kernels, "staged_loop", ("tile", "sources"))
    out += ["", "## Theoretical occupancy (modelled, 256-thread blocks)", "",
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
    out += ["", "## Modelled ceiling of the data-movement kernels on the seed lines", "",
            "Per warp (H100, 32 lanes, one scheduler) or wave (MI300X, 64 lanes, one SIMD): a row-walk",
            "kernel gives each row 2^k threads (about 4 chunks each, at least 2 for rows of 32 bytes or more, at most 32), so a warp holds",
            "32 / 2^k rows and issues the row overhead once plus, per chunk it walks, the `copy` path",
            "(channels_last rows whose bytes are a multiple of 16) or the `gather` path, and the",
            "`partial` path twice when rows are not 16-byte aligned. An element-walk kernel issues its",
            "`any` path per element or channel packet. A dense walk (dst dense: the scatter buffer and",
            "dx always are, when the kernel has one) gives a warp's lanes consecutive chunks, each",
            "thread `passes` chunks 64 apart (launch.h: about 16384 groups of 64 threads, 1 to 64",
            "passes): per pass a warp issues each path one of its lanes takes once, `setup` on every",
            "thread's first pass, `crossing` once per element position at which a walking lane's",
            "chunk ends a row (averaged over the passes of the buffer, dst 16-byte aligned), `copy`",
            "instead of `interior` for channels_last rows whose bytes are a multiple of 16. A staged",
            "walk (dst dense, the row's step 2, rows that fit: layout.cpp staged_rows_fit; or the",
            "interleave's channels_last rows shorter than a chunk, staged in rows along W whose",
            "positions are packets of the channels: stages_packets) issues per",
            "tile its `tile` pass in every warp and its `sources` region in the warps that describe the",
            "tile's rows (one thread per row and residue, averaged over where in its row a tile",
            "starts), for 8 KB / warps per block of elements per warp.",
            "H100 cycles: max(instructions issued, 2 x 32-bit",
            "integer instructions); MI300X cycles: max(4 x VALU (16 for quarter-rate multiplies),",
            "4 x instructions of any other one class). Elements/s = issuers x clock x elements per warp /",
            "cycles per warp (H100: 132 x 4 schedulers x 1.98e9; MI300X: 304 x 4 SIMDs x 2.1e9).",
            "Bytes/s = that x bytes moved per written element ((written + read) x element size /",
            "written), against HBM (3.35 TB/s H100, 5.3 TB/s MI300X); the modelled rate is the lower.", ""]
    out += summary_table(rows, kernels, occupancy)
    out += ["", "Every configuration is in `kernels.json` (`model`).", ""]
    out += splitk_markdown(splitk or {})
    out += ["## Rules (issue 15)", ""]
    if problems:
        out += [f"{len(problems)} violation(s):", ""] + [f"- {p}" for p in problems]
    else:
        out += ["No violation: no spill; stack frame and scratch 0 in the data-movement kernels; no",
                "compiler-made LDS; data-movement occupancy at least 50% on sm_90 and gfx940;",
                "splitk's products on tensor cores / MFMA or the vendor GEMM."]
    return "\n".join(out) + "\n"


def path_rows(kernels: list[dict], key: str, paths: tuple[str, ...]) -> list[str]:
    """A table row per kernel and target with a `key` loop (dense_loop, staged_loop):
    each of its `paths` as instructions / modelled cycles."""
    cell = lambda c: f"{c['instructions']} / {c['cycles']}" if c else "-"
    return [f"| {k['kernel']} | {arch} | " + " | ".join(cell(loop.get(name)) for name in paths) + " |"
            for k in kernels for arch in NV_ARCHS + AMD_ARCHS
            if (loop := k["targets"].get(arch, {}).get(key))]


def splitk_markdown(splitk: dict) -> list[str]:
    source, models = splitk.get("source", {}), splitk.get("model", [])
    out = ["## splitk: where the products run, and its modelled time on seed 001", "",
           f"From the sources: GEMM calls in csrc/ops/splitk.cpp {source.get('gemm_calls')}, "
           f"fp32 results from 16-bit operands: {source.get('fp32_results_from_16bit_operands')}, "
           f"GPU tensors take that path: {source.get('gpu_tensors_take_the_gemm_path')}; kernels in "
           f"csrc/hip/splitk.cu: {source.get('kernels')} (product kernels: {source.get('product_kernels')}). "
           f"Vendor GEMM: **{source.get('vendor_gemm')}**.", ""]
    if not models:
        return out + ["(no C++ compiler for scripts/splitk_layout.cpp: no model)", ""]
    out += ["Modelled (no GPU): bytes at HBM bandwidth, the GEMM at "
            f"{models[0]['gemm_fraction_of_peak']:.0%} of dense 16-bit tensor peak (see the comment above "
            "`model_splitk`); `no reuse` reads every operand of every tap GEMM from HBM.", "",
            "| device | chunks | steps x taps | pad us | staging us | GEMM us (flops / dy reads) | partials us | "
            "modelled us | roofline us | x roofline | no reuse us | step working set MB / cache MB |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for m in models:
        u, l = m["us"], m["layout"]
        out.append(f"| {m['device']} | {l['chunks']} | {m['step_groups']} x {l['offset_taps']} | {u['pad']} | "
                   f"{u['staging']} | {u['gemm']} ({u['gemm_flops']} / {u['gemm_grad_output_reads']}) | "
                   f"{u['partials']} | **{m['modelled_us']}** | {m['roofline_us']} | {m['times_roofline']} | "
                   f"{m['no_reuse_us']} | {m['step_working_set_mb']} / {m['last_level_cache_mb']} |")
    return out + [""]


def summary_table(rows: list[dict], kernels: list[dict], occupancy: list[dict]) -> list[str]:
    """One line per (kernel, element size, layout) over the seed lines: the worst
    configuration's instructions per element and modelled rate, and the worst
    resources of the instantiations those configurations launch."""
    by_name = {k["kernel"]: k for k in kernels}
    occ = {r["kernel"]: r for r in occupancy}
    out = ["| kernel | walk | element bytes | layout | instr/element sm_90 / gfx940 | stack sm_90 B | spills | "
           "LDS gfx940 B (compiler-made) | occupancy sm_90 / gfx940 | modelled H100 | modelled MI300X | worst line H100 / MI300X |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["kernel"], r["element_bytes"], r["layout"]), []).append(r)
    for (kernel, eb, layout), rs in sorted(groups.items()):
        def worst(dev):
            vals = [r for r in rs if r.get(dev)]
            return min(vals, key=lambda r: r[dev]["fraction_of_hbm"]) if vals else None
        wh, wm = worst(H100["name"]), worst(MI300X["name"])
        names = sorted({r["instantiation"] for r in rs if r["instantiation"]})
        ts = [by_name[n]["targets"] for n in names if n in by_name]
        stack = max((t.get("sm_90", {}).get("stack", 0) for t in ts), default=0)
        spills = sum(t.get(a, {}).get("spill_stores", 0) + t.get(a, {}).get("vgpr_spill_count", 0)
                     + t.get(a, {}).get("sgpr_spill_count", 0) for t in ts for a in NV_ARCHS + AMD_ARCHS)
        lds = max((t.get("gfx940", {}).get("group_segment_fixed_size", 0) for t in ts), default=0)
        declared = max((t.get("sm_90", {}).get("smem", 0) for t in ts), default=0)
        occ_nv = min((occ[n]["sm_90"]["occupancy"] for n in names if n in occ and "sm_90" in occ[n]), default=0)
        occ_amd = min((occ[n]["gfx940"]["occupancy"] for n in names if n in occ and "gfx940" in occ[n]),
                      default=0)
        ipe = lambda w, d: f"{w[d]['instructions_per_element']:.1f}" if w else "-"
        cell = lambda w, d: (f"{w[d]['modelled_tb_s']:.2f} TB/s ({pct(min(w[d]['fraction_of_hbm'], 1))})"
                             if w else "-")
        walks = ", ".join(sorted({r["walk"] for r in rs if r.get("walk")})) or "-"
        out.append(f"| {kernel} | {walks} | {eb} | {layout} | {ipe(wh, H100['name'])} / {ipe(wm, MI300X['name'])} | "
                   f"{stack} | {spills} | {lds} ({lds - declared}) | {pct(occ_nv)} / {pct(occ_amd)} | "
                   f"{cell(wh, H100['name'])} | {cell(wm, MI300X['name'])} | "
                   f"{wh['line'] if wh else '-'} / {wm['line'] if wm else '-'} |")
    return out


def tools_line(tools: Tools) -> str:
    def version(cmd, pattern):
        try:
            text = subprocess.run(cmd, capture_output=True, text=True).stdout
        except OSError:
            return "missing"
        m = re.search(pattern, text)
        return m.group(0) if m else "?"
    parts = []
    if tools.nvcc:
        parts.append("nvcc " + version([tools.nvcc, "--version"], r"V\d+\.\d+\.\d+"))
    if tools.cuobjdump:
        parts.append("cuobjdump " + version([tools.cuobjdump, "--version"], r"V\d+\.\d+\.\d+"))
    if tools.hipcc:
        parts.append("hipcc: " + version([tools.hipcc, "--version"], r".*clang version.*"))
    return "; ".join(parts) or "none"


def splitk_only(out: Path | None) -> int:
    with tempfile.TemporaryDirectory(prefix="kernel_report.") as work:
        splitk = {"source": splitk_products_source(), "model": splitk_model(Path(work))}
    report = "\n".join(["# splitk: static evidence (GPU figures modelled)", "",
                         "Command: `python3 scripts/kernel_report.py --splitk-only"
                         + (f" --out {os.path.relpath(out, ROOT)}`" if out else "`"), ""]
                        + splitk_markdown(splitk)) + "\n"
    if out:
        out.mkdir(parents=True, exist_ok=True)
        (out / "report.md").write_text(report)
        (out / "splitk.json").write_text(json.dumps(
            {"splitk": splitk, "devices": DEVICES}, indent=1, default=str) + "\n")
    else:
        print(report)
    return 0 if splitk["source"]["vendor_gemm"] else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="write report.md and kernels.json here")
    parser.add_argument("--check", nargs="?", const="all", choices=("all",) + ROLES,
                        help="exit 1 when a rule is broken (by the kernels of one role, or all)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--keep", type=Path, help="keep cubins, SASS and assembly here")
    parser.add_argument("--splitk-only", action="store_true",
                        help="only splitk's source check and model (no kernel compilation)")
    args = parser.parse_args()
    if args.splitk_only:
        return splitk_only(args.out)

    tools = Tools.discover()
    missing = [n for n, v in (("nvcc", tools.nvcc), ("cuobjdump", tools.cuobjdump),
                              ("hipcc", tools.hipcc)) if not v]
    if missing:
        print("kernel_report: not found: " + ", ".join(missing) +
              " (cuobjdump: pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm)", file=sys.stderr)
        if args.check and (not tools.nvcc or not tools.hipcc):
            return 1
    work_dir = args.keep or Path(tempfile.mkdtemp(prefix="kernel_report."))
    work_dir.mkdir(parents=True, exist_ok=True)
    kernels = collect(tools, work_dir, args.jobs)
    splitk = {"source": splitk_products_source(), "model": splitk_model(work_dir)}
    if not args.keep:
        shutil.rmtree(work_dir, ignore_errors=True)
    occupancy = occupancy_rows(kernels)
    rows = model(kernels)
    problems = violations(kernels)
    command = "python3 scripts/kernel_report.py " + " ".join(
        a if not a.startswith("/") else os.path.relpath(a, ROOT) for a in sys.argv[1:])
    report = markdown(kernels, occupancy, rows, problems, tools, command.strip(), splitk)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "report.md").write_text(report)
        (args.out / "kernels.json").write_text(json.dumps(
            {"kernels": kernels, "occupancy": occupancy, "model": rows, "splitk": splitk,
             "violations": problems, "devices": DEVICES}, indent=1, default=str) + "\n")
    else:
        print(report)
    for p in problems:
        print("kernel_report: " + p, file=sys.stderr)
    if not args.check:
        return 0
    checked = violations(kernels, ROLES if args.check == "all" else (args.check,))
    if checked:
        print(f"kernel_report: {len(checked)} violation(s) of the rules checked ({args.check})",
              file=sys.stderr)
    return 1 if checked else 0


if __name__ == "__main__":
    sys.exit(main())
