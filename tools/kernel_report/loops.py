"""The loops that move a data-movement kernel's elements, and the paths through
them, each as its instructions and modelled cycles:
- for a staged walk (`*_staged_kernel`: a block stages a tile of dst in shared
  memory, then stores it in aligned 16-byte chunks) the pass through its tile
  loop with and without describing the tile's sources (staged_tile_loop);
- for a dense walk (`*_dense_kernel`: runs of aligned 16-byte chunks of dst's
  memory, 64 chunks apart per thread, the row's set-up and cursor carried from
  chunk to chunk) the paths through its chunk loop: the row set-up, a chunk
  inside its row's interior (gathered or copied), a chunk of one or two row
  pieces, a chunk whose elements are walked one by one, and the next row's
  set-up inside that walk (dense_chunk_loop);
- for other kernels the innermost natural loop that holds a global store, and
  the instructions on the longest path through it (per_element_loop)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .control_flow import (Instruction, block_weight, heaviest_path, longest_path,
                           loops_with_stores, natural_loops)


@dataclass(frozen=True)
class Isa:
    """What the loop finders read of a vendor's instructions: predicates on one
    instruction, and the modelled issue cycles of an opcode histogram."""
    keep: Callable[[Instruction], bool]            # counted (not a NOP)
    is_store: Callable[[Instruction], bool]        # a global store
    is_wide_store: Callable[[Instruction], bool]   # a 16-byte global store
    is_wide_load: Callable[[Instruction], bool]    # a 16-byte load
    is_narrow_load: Callable[[Instruction], bool]  # a load of less than 16 bytes
    is_division: Callable[[Instruction], bool]     # what a division by a constant compiles to
    is_barrier: Callable[[Instruction], bool]      # a block-wide barrier
    cycles: Callable[[dict[str, int]], int]


def data_movement_loop(code: list[Instruction], isa: Isa, dense: int | None, staged: bool) -> dict:
    """A data-movement kernel's loop under the key its walk gives it: `staged_loop`
    (staged_tile_loop), `dense_loop` (dense_chunk_loop, `dense` elements per
    chunk) or `loop` (per_element_loop)."""
    if staged:
        return {"staged_loop": staged_tile_loop(code, isa.is_store, isa.keep, isa.is_wide_store,
                                                isa.is_barrier, isa.cycles)}
    if dense:
        return {"dense_loop": dense_chunk_loop(code, isa.is_store, isa.keep, isa.is_wide_store,
                                               isa.is_wide_load, isa.is_division, isa.cycles, dense,
                                               isa.is_narrow_load)}
    return {"loop": per_element_loop(code, isa.is_store, isa.keep, isa.is_wide_store, isa.is_wide_load,
                                     isa.cycles)}


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
