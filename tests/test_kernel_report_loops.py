"""The loops of the data-movement kernels and the paths through them: a row
walk's, a dense walk's chunk loop and a staged walk's tile loop, on small
hand-written SASS listings (tools/kernel_report/loops.py)."""
from kernel_report import loops, nvidia

ISA = nvidia.SASS  # the loop finders' reading of SASS


# A row loop (0x10..0xb0) around a chunk loop (0x30..0x60) with a 16-byte
# store, and an end-chunk loop (0x70..0x90) with a narrow one.
ROWS = """\
\t\tFunction : _Z1kv
        /*0000*/                   S2R R0, SR_TID.X ;
        /*0010*/                   IMAD R1, R0, 0x4, RZ ;
        /*0020*/                   MOV R2, RZ ;
        /*0030*/                   LDG.E.128 R4, desc[UR4][R8.64] ;
        /*0040*/                   STG.E.128 desc[UR4][R10.64], R4 ;
        /*0050*/                   IADD3 R2, R2, 0x1, RZ ;
        /*0060*/               @P0 BRA 0x30 ;
        /*0070*/                   STG.E.U16 desc[UR4][R10.64], R4 ;
        /*0080*/                   IADD3 R3, R3, 0x1, RZ ;
        /*0090*/               @P1 BRA 0x70 ;
        /*00a0*/                   IADD3 R0, R0, 0x100, RZ ;
        /*00b0*/               @P2 BRA 0x10 ;
        /*00c0*/                   EXIT ;
"""


def test_row_walk_paths():
    code = nvidia.parse_sass(ROWS)["_Z1kv"]
    loop = loops.data_movement_loop(code, ISA, None, False)["loop"]
    assert loop["paths"]["copy"]["instructions"] == 4
    assert loop["row_overhead"]["instructions"] == 2 + 2  # IMAD, MOV; IADD3, BRA (row loop)
    assert loop["end_chunk"]["instructions"] == 3


# A dense walk's chunk loop (0x30..0x2c0) as the kernels lay it out: the pass's
# cursor hop, a conditional row set-up (two blocks of divisions, one behind a
# branch of its own), then an interior chunk gathered (0xa0) or copied by one
# 16-byte load (0xe0), a chunk of row pieces (0x120, the next row's set-up and
# piece at 0x140 where it holds a row end) stored through the lane mask, or a
# walked chunk (the element loop 0x1e0..0x230, its crossing site 0x200) stored
# the same way.
DENSE_RUN = """\
\t\tFunction : _Z1kv
        /*0000*/                   S2R R0, SR_TID.X ;
        /*0010*/                   ISETP.GE.AND P0, PT, R0, c[0x0][0x10], PT ;
        /*0020*/               @P0 EXIT ;
        /*0030*/                   IADD3 R3, R3, 0x1f8, RZ ;
        /*0040*/               @P1 BRA 0x80 ;
        /*0050*/                   IMAD.HI.U32 R1, R0, R2, RZ ;
        /*0060*/               @P2 BRA 0x80 ;
        /*0070*/                   IMAD.HI.U32 R1, R1, R2, RZ ;
        /*0080*/               @P3 BRA 0x110 ;
        /*0090*/               @P4 BRA 0xe0 ;
        /*00a0*/                   LDG.E.U16 R4, desc[UR4][R10.64] ;
        /*00b0*/                   LDG.E.U16 R5, desc[UR4][R12.64] ;
        /*00c0*/                   STG.E.128 desc[UR4][R8.64], R4 ;
        /*00d0*/                   BRA 0x2a0 ;
        /*00e0*/                   LDG.E.128 R4, desc[UR4][R10.64] ;
        /*00f0*/                   STG.E.128 desc[UR4][R8.64], R4 ;
        /*0100*/                   BRA 0x2a0 ;
        /*0110*/               @P5 BRA 0x1d0 ;
        /*0120*/                   LDG.E.U16 R4, desc[UR4][R10.64] ;
        /*0130*/               @P6 BRA 0x160 ;
        /*0140*/                   IMAD.HI.U32 R1, R3, R2, RZ ;
        /*0150*/                   LDG.E.U16 R5, desc[UR4][R12.64] ;
        /*0160*/               @P0 BRA 0x190 ;
        /*0170*/                   STG.E.U16 desc[UR4][R8.64], R4 ;
        /*0180*/                   BRA 0x2a0 ;
        /*0190*/                   STG.E.128 desc[UR4][R8.64], R4 ;
        /*01a0*/                   BRA 0x2a0 ;
        /*01b0*/                   NOP ;
        /*01c0*/                   NOP ;
        /*01d0*/                   MOV R7, RZ ;
        /*01e0*/                   IADD3 R3, R3, 0x1, RZ ;
        /*01f0*/               @P1 BRA 0x210 ;
        /*0200*/                   IMAD.HI.U32 R4, R3, R2, RZ ;
        /*0210*/                   IADD3 R7, R7, 0x1, RZ ;
        /*0220*/                   ISETP.LT.AND P4, PT, R7, 0x2, PT ;
        /*0230*/               @P4 BRA 0x1e0 ;
        /*0240*/               @P0 BRA 0x270 ;
        /*0250*/                   STG.E.U16 desc[UR4][R8.64], R4 ;
        /*0260*/                   BRA 0x2a0 ;
        /*0270*/                   STG.E.128 desc[UR4][R8.64], R4 ;
        /*0280*/                   BRA 0x2a0 ;
        /*0290*/                   NOP ;
        /*02a0*/                   IADD3 R0, R0, 0x100, RZ ;
        /*02b0*/                   ISETP.LT.AND P3, PT, R0, 0x10, PT ;
        /*02c0*/               @P3 BRA 0x30 ;
        /*02d0*/                   EXIT ;
"""


def test_dense_chunk_loop_paths():
    code = nvidia.parse_sass(DENSE_RUN)["_Z1kv"]
    loop = loops.dense_chunk_loop(code, ISA.is_store, ISA.keep, ISA.is_wide_store, ISA.is_wide_load,
                                  ISA.is_division, ISA.cycles, 2, ISA.is_narrow_load)
    # interior: IADD3, BRA, BRA, BRA, LDG, LDG, STG.128, BRA, IADD3, ISETP, BRA
    # (3 integer: 6 cycles < 11 issued)
    assert loop["interior"] == {"instructions": 11, "cycles": 11}
    # copy: the same with one LDG.128 for the two LDG
    assert loop["copy"] == {"instructions": 10, "cycles": 10}
    # the set-up: both blocks of divisions (IMAD.HI, BRA, IMAD.HI)
    assert loop["setup"] == {"instructions": 3, "cycles": 3}
    # pieces: IADD3, BRA, BRA, BRA, LDG, BRA, BRA, STG.128, BRA, IADD3, ISETP, BRA
    assert loop["pieces"] == {"instructions": 12, "cycles": 12}
    # a row end adds the next row's set-up and piece (IMAD.HI, LDG), not the pass's set-up
    assert loop["rowend"] == {"instructions": 2, "cycles": 2}
    # walked: IADD3, BRA, BRA, BRA, MOV, BRA, STG.128, BRA, IADD3, ISETP, BRA and two
    # element passes of IADD3, BRA, IADD3, ISETP, BRA: 21 issued, 4 + 2 x 3 integer
    assert loop["chunk"] == {"instructions": 21, "cycles": 21}
    assert loop["crossing"] == {"instructions": 1, "cycles": 1}
    assert loop["element_loop"]


# A staged walk's tile loop: threads below the sources' count describe one
# (a division, a shared store), a barrier, the staging (a load, a shared
# store), a barrier, the chunk (a 16-byte store, or narrow stores at dst's
# ends), a barrier, the loop back.
STAGED_TILE = """\
\t\tFunction : _Z1kv
        /*0000*/                   S2R R0, SR_TID.X ;
        /*0010*/                   IADD3 R3, R3, 0x1, RZ ;
        /*0020*/               @P1 BRA 0x60 ;
        /*0030*/                   IMAD.HI.U32 R1, R0, R2, RZ ;
        /*0040*/                   LDG.E.64 R4, desc[UR4][R10.64] ;
        /*0050*/                   STS.64 [R6], R4 ;
        /*0060*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;
        /*0070*/                   LDS R4, [R7] ;
        /*0080*/                   LD.E.U16 R5, desc[UR4][R12.64] ;
        /*0090*/                   STS [R6], R5 ;
        /*00a0*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;
        /*00b0*/                   LDS.128 R4, [R6] ;
        /*00c0*/               @P2 BRA 0xf0 ;
        /*00d0*/                   STG.E.128 desc[UR4][R8.64], R4 ;
        /*00e0*/                   BRA 0x110 ;
        /*00f0*/                   STG.E.U16 desc[UR4][R8.64], R4 ;
        /*0100*/                   STG.E.U16 desc[UR4][R8.64+0x2], R5 ;
        /*0110*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;
        /*0120*/                   ISETP.LT.AND P0, PT, R3, R9, PT ;
        /*0130*/               @P0 BRA 0x10 ;
        /*0140*/                   EXIT ;
"""


def test_staged_tile_loop_paths():
    code = nvidia.parse_sass(STAGED_TILE)["_Z1kv"]
    loop = loops.staged_tile_loop(code, ISA.is_store, ISA.keep, ISA.is_wide_store, ISA.is_barrier, ISA.cycles)
    # tile: IADD3, BRA, BAR, LDS, LD, STS, BAR, LDS.128, BRA, STG.128, BRA, BAR, ISETP, BRA
    # (IADD3 and ISETP integer: 4 cycles < 14 issued)
    assert loop["tile"] == {"instructions": 14, "cycles": 14}
    # the sources: IMAD.HI, LDG.E.64, STS.64
    assert loop["sources"] == {"instructions": 3, "cycles": 3}
