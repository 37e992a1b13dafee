"""Loops found by their back edges, paths through them, and dominance, on small
hand-written SASS listings (tools/kernel_report/control_flow.py)."""
from kernel_report import control_flow, loops, nvidia


# A grid-stride loop at 0x30..0x80 with one optional instruction (0x50).
SASS = """\
\t\tFunction : _Z1kv
        /*0000*/                   S2R R0, SR_TID.X ;
        /*0010*/                   ISETP.GE.AND P0, PT, R0, c[0x0][0x10], PT ;
        /*0020*/               @P0 EXIT ;
        /*0030*/                   IADD3 R2, R0, 0x1, RZ ;
        /*0040*/               @P1 BRA 0x60 ;
        /*0050*/                   IMAD R3, R2, 0x2, RZ ;
        /*0060*/                   STG.E [R4.64], R2 ;
        /*0070*/                   ISETP.LT.AND P2, PT, R2, 0x10, PT ;
        /*0080*/               @P2 BRA 0x30 ;
        /*0090*/                   EXIT ;
        /*00a0*/                   BRA 0xa0 ;
        /*00b0*/                   NOP ;
"""


def sass_loop(listing):
    code = nvidia.parse_sass(listing)["_Z1kv"]
    return loops.data_movement_loop(code, nvidia.SASS, None, False)["loop"]


def test_sass_loop_is_found_by_its_back_edge():
    loop = sass_loop(SASS)
    assert (loop["longest"], loop["shortest"], loop["inner_loops"]) == (6, 5, 0)
    # IADD3, IMAD, ISETP are integer-pipe instructions: 2 cycles each on the half-rate pipe.
    assert loop["paths"]["any"] == {"instructions": 6, "cycles": 6}
    assert loop["paths"]["partial"] == {"instructions": 6, "cycles": 6}  # STG.E: a narrow store
    assert "gather" not in loop["paths"] and "row_overhead" not in loop


# A loop (0x10..0x90) holding a cycle entered at two blocks (0x20 and 0x50:
# irreducible, as hipcc emits for the joined interleave rows), which no
# dominator-based back edge breaks. The path search must still end (it used
# to follow its own predecessor links round that cycle forever).
IRREDUCIBLE = """\
\t\tFunction : _Z1kv
        /*0000*/                   S2R R0, SR_TID.X ;
        /*0010*/               @P0 BRA 0x50 ;
        /*0020*/                   IADD3 R2, R0, 0x1, RZ ;
        /*0030*/               @P1 BRA 0x80 ;
        /*0040*/                   BRA 0x50 ;
        /*0050*/                   IMAD R3, R2, 0x2, RZ ;
        /*0060*/               @P2 BRA 0x20 ;
        /*0070*/                   NOP ;
        /*0080*/                   STG.E [R4.64], R2 ;
        /*0090*/               @P3 BRA 0x10 ;
        /*00a0*/                   EXIT ;
"""


def test_irreducible_cycle_is_counted_once():
    loop = sass_loop(IRREDUCIBLE)
    # BRA 0x50, IMAD, BRA 0x20, IADD3, BRA 0x80, STG, BRA 0x10: the cycle's
    # edge 0x40 -> 0x50 (retreating in the depth-first walk) left out
    assert loop["paths"]["any"]["instructions"] == 7
    assert (loop["longest"], loop["shortest"], loop["inner_loops"]) == (7, 5, 1)


def test_dominance_on_a_diamond_and_unreachable_code():
    code = nvidia.parse_sass(SASS)["_Z1kv"]
    blocks = control_flow.build_blocks(code)
    dom = control_flow.Dominance(blocks)
    at = {code[b.start].label: k for k, b in enumerate(blocks)}
    entry, loop, skipped, store, unreachable = at["0x0"], at["0x30"], at["0x50"], at["0x60"], at["0xb0"]
    assert dom.dominates(entry, store) and dom.dominates(loop, store)
    assert not dom.dominates(skipped, store)  # 0x40 jumps over it
    assert dom.dominates(unreachable, unreachable) and not dom.dominates(entry, unreachable)
