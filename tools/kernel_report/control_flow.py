"""Control flow of a kernel's instruction list: basic blocks, dominators,
natural loops (a back-edge branch to a block that dominates it), and the
longest or heaviest path through a loop body. One longest-path pass over the
body with the retreating edges of a depth-first walk removed: linear in
blocks and edges, and acyclic even where a cycle has two entries, which hipcc
emits."""
from __future__ import annotations

from dataclasses import dataclass, field


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
