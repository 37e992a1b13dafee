"""scripts/kernel_report.py on small hand-written listings: parsing, loop finding,
occupancy and the rules. The expected occupancies are those of the static
kernel review of 2026-11-23, computed there by hand."""
import importlib.util
import math
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "kernel_report.py"
spec = importlib.util.spec_from_file_location("kernel_report", SCRIPT)
kr = importlib.util.module_from_spec(spec)
sys.modules["kernel_report"] = kr  # dataclasses look their module up by name
spec.loader.exec_module(kr)

PTXAS = """\
ptxas info    : Compiling entry function '_Z1kv' for 'sm_90'
ptxas info    : Function properties for _Z1kv
    40 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 28 registers, used 1 barriers, 40 bytes cumulative stack size, 8704 bytes smem
"""

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

AMD = """\
_Z1kv:                                  ; @_Z1kv
; %bb.0:
\ts_load_dword s4, s[0:1], 0x0
\tv_mov_b32_e32 v1, 0
.LBB0_1:                                ; =>This Inner Loop Header: Depth=1
\tv_add_u32_e32 v1, 1, v1
\tv_mul_lo_u32 v2, v1, 3
\tglobal_store_dword v[4:5], v2, off
\ts_cbranch_vccnz .LBB0_1
; %bb.2:
\ts_endpgm
\t.section\t.rodata,#alloc
\t.amdgpu_metadata
---
amdhsa.kernels:
  - .agpr_count:     0
    .group_segment_fixed_size: 6144
    .max_flat_workgroup_size: 256
    .name:           _Z1kv
    .private_segment_fixed_size: 16
    .sgpr_count:     20
    .sgpr_spill_count: 0
    .vgpr_count:     12
    .vgpr_spill_count: 2
...
\t.end_amdgpu_metadata
"""


def test_ptxas_resources():
    assert kr.parse_ptxas(PTXAS)["_Z1kv"] == {
        "registers": 28, "stack": 40, "spill_stores": 8, "spill_loads": 12, "smem": 8704}


def sass_loop(listing):
    code = kr.parse_sass(listing)["_Z1kv"]
    return kr.per_element_loop(code, kr.sass_is_store, kr.sass_keep,
                               lambda i: kr.sass_is_store(i) and i.opcode.endswith(".128"),
                               lambda i: i.opcode.startswith("LDG") and i.opcode.endswith(".128"),
                               lambda h: kr.sass_cycles_per_iteration(h)[0])


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
    code = kr.parse_sass(SASS)["_Z1kv"]
    blocks = kr.build_blocks(code)
    dom = kr.Dominance(blocks)
    at = {code[b.start].label: k for k, b in enumerate(blocks)}
    entry, loop, skipped, store, unreachable = at["0x0"], at["0x30"], at["0x50"], at["0x60"], at["0xb0"]
    assert dom.dominates(entry, store) and dom.dominates(loop, store)
    assert not dom.dominates(skipped, store)  # 0x40 jumps over it
    assert dom.dominates(unreachable, unreachable) and not dom.dominates(entry, unreachable)

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
    loop = sass_loop(ROWS)
    assert loop["paths"]["copy"]["instructions"] == 4
    assert loop["row_overhead"]["instructions"] == 2 + 2  # IMAD, MOV; IADD3, BRA (row loop)
    assert loop["end_chunk"]["instructions"] == 3


def test_amd_loop_metadata_and_cycles():
    code = kr.parse_amd_code(AMD)["_Z1kv"]
    loop = kr.per_element_loop(code, kr.amd_is_store, kr.amd_keep, lambda i: False,
                               lambda i: False, lambda h: kr.amd_cycles_per_iteration(h)[0])
    assert (loop["longest"], loop["shortest"], loop["inner_loops"]) == (4, 4, 0)
    # one full-rate VALU, one quarter-rate multiply
    assert loop["paths"]["any"] == {"instructions": 4, "cycles": 4 + 16}
    cycles, classes = kr.amd_cycles_per_iteration({"v_add_u32_e32": 1, "v_mul_lo_u32": 1,
                                                   "global_store_dword": 1, "s_cbranch_vccnz": 1})
    assert classes == {"valu": 2, "vmem": 1, "branch_message": 1}
    meta = kr.parse_amd_metadata(AMD)["_Z1kv"]
    assert meta["group_segment_fixed_size"] == 6144 and meta["vgpr_spill_count"] == 2
    assert meta["private_segment_fixed_size"] == 16


def test_demangled_names_match_across_vendors():
    assert kr.short_name("void bwdconv::hip::(anonymous namespace)::interleave_kernel"
                         "<unsigned short, int>(bwdconv::hip::InterleaveParams, long)") == \
        "interleave_kernel<unsigned short, int>"


@pytest.mark.parametrize("registers, smem, blocks, occupancy", [
    (28, 0, 8, 1.0), (40, 0, 6, 0.75), (72, 8704, 3, 0.375), (80, 16896, 3, 0.375)])
def test_sm90_occupancy(registers, smem, blocks, occupancy):
    r = kr.sm90_occupancy(registers, smem)
    assert (r["blocks"], r["occupancy"]) == (blocks, occupancy)


@pytest.mark.parametrize("vgpr, lds, waves", [(32, 24576, 2), (32, 6144, 8), (88, 8704, 5),
                                              (82, 16896, 3)])
def test_gfx940_occupancy(vgpr, lds, waves):
    assert kr.gfx940_occupancy(vgpr, 0, lds)["waves_per_simd"] == waves


def kernel(name, role, sm90=None, gfx940=None):
    base_nv = {"registers": 32, "stack": 0, "spill_stores": 0, "spill_loads": 0, "smem": 0,
               "tensor_core_instructions": 0}
    base_amd = {"vgpr_count": 32, "agpr_count": 0, "sgpr_count": 40, "group_segment_fixed_size": 0,
                "private_segment_fixed_size": 0, "vgpr_spill_count": 0, "sgpr_spill_count": 0,
                "mfma_instructions": 0}
    return {"kernel": name, "role": role, "targets": {"sm_90": {**base_nv, **(sm90 or {})},
                                                      "gfx940": {**base_amd, **(gfx940 or {})}}}


def test_rules():
    mma = kernel("splitk_partials_kernel<Half, float>", "splitk", {"tensor_core_instructions": 8},
                 {"mfma_instructions": 8})
    clean = [kernel("scatter_kernel<unsigned short, int>", "data_movement"), mma]
    assert kr.violations(clean) == []
    broken = [
        kernel("scatter_kernel<unsigned short, int>", "data_movement", {"stack": 40}),
        kernel("interleave_kernel<unsigned short, int>", "data_movement", None,
               {"group_segment_fixed_size": 24576}),
        kernel("splitk_partials_kernel<float, float>", "splitk", {"spill_stores": 48, "smem": 8704},
               {"group_segment_fixed_size": 8704, "mfma_instructions": 4}),
    ]
    found = kr.violations(broken)
    assert any("40 B stack frame" in f for f in found)
    assert any("24576 B of it made by the compiler" in f for f in found)
    assert any("spills 48 B" in f for f in found)
    assert any("without HMMA/HGMMA" in f for f in found)
    assert not any("splitk_partials_kernel<float, float> [gfx940]" in f for f in found)
    # a splitk kernel's declared shared memory is not compiler-made LDS
    assert not any("8704 B LDS" in f for f in found)


def test_occupancy_rule_and_roles():
    # 72 registers: 3 blocks of 8 warps on sm_90 (37.5%); 136 VGPRs: 3 waves per SIMD on gfx940
    low = [kernel("interleave_kernel<unsigned short, int, 2, 2>", "data_movement",
                  {"registers": 72}, {"vgpr_count": 136}),
           kernel("splitk_partials_kernel<float, float>", "splitk", {"registers": 72})]
    found = kr.violations(low)
    assert any("[sm_90]: modelled occupancy 38%" in f for f in found)
    assert any("[gfx940]: modelled occupancy 38%" in f for f in found)
    assert not any("splitk_partials_kernel<float, float> [sm_90]: modelled occupancy" in f
                   for f in found)  # the occupancy rule is for data movement
    data_movement = kr.violations(low, ("data_movement",))
    assert data_movement and all("interleave" in f for f in data_movement)
    assert all("interleave" not in f for f in kr.violations(low, ("splitk",)))


def test_splitk_products_run_on_the_vendor_gemm_per_the_sources():
    source = kr.splitk_products_source()
    assert source["vendor_gemm"] and source["gpu_tensors_take_the_gemm_path"]
    assert source["fp32_results_from_16bit_operands"]
    assert source["kernels"] == ["splitk_reduce_kernel"] and source["product_kernels"] == []
    # the reduce alone is no product kernel: no tensor-core rule applies to it
    assert kr.violations([kernel("splitk_reduce_kernel<float, float>", "splitk")]) == []


# The planner's layout for seed 001's line on an H100 (scripts/splitk_layout.cpp
# prints it: 113 ranges of 2 output rows over the whole batch, 3 taps by offset).
H100_SEED_001_LAYOUT = {"chunks": 113, "batch_per_chunk": 16, "batch_chunks": 1,
                        "rows_per_chunk": 2, "space_chunks": 113, "offset_taps": 3,
                        "staged_taps": 3, "halo_rows": 2, "step_rows": 2, "tiles_per_chunk": 1,
                        "staging_cap_bytes": 17301504, "partial_cap_bytes": 67108864,
                        "gemm_tile": 128}


def test_splitk_model_of_seed_001_on_an_h100():
    line = next(l for l in kr.read_seeds() if l.direction == 4)
    m = kr.model_splitk(line, kr.H100, H100_SEED_001_LAYOUT)
    # roofline: x (25.9 MB) + dy (103.7 MB) at 3.35 TB/s
    assert m["roofline_us"] == pytest.approx(38.7, abs=0.1)
    # 16 batch rows, each a step of the 112 full ranges and one of the 1-row last range
    assert m["step_groups"] == 32 and m["aten_calls"] == 1 + 32 * 4 + 1
    # staged: 16 channels x 3 taps x 225 columns per staged row, 2 halo rows per range
    assert m["bytes_mb"]["staged_writes"] == pytest.approx(
        16 * 16 * 3 * 225 * 2 * (112 * (2 + 2) + (1 + 2)) / 1e6, abs=0.1)
    assert m["gemm_gflop"] == pytest.approx(2 * 64 * 16 * 9 * 16 * 225 * 225 / 1e9, abs=0.01)
    assert m["device_fill"] == pytest.approx(113 / 132, abs=1e-3)
    assert m["times_roofline"] <= 3 < m["no_reuse_times_roofline"]


# A dense walk's chunk loop (0x30..0xf0) for 2-element chunks, unrolled: the
# chunk's row (a division), element 0, the row set up anew when element 0
# ends a row (0x60..0x70: a division on a conditional block), element 1 (no
# site after the last element), then either one 16-byte store or, for the
# buffer's first and last chunk, an element store.

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
    code = kr.parse_sass(DENSE_RUN)["_Z1kv"]
    loop = kr.dense_chunk_loop(code, kr.sass_is_store, kr.sass_keep,
                               lambda i: kr.sass_is_store(i) and i.opcode.endswith(".128"),
                               lambda i: i.opcode.startswith("LDG") and i.opcode.endswith(".128"),
                               lambda i: i.opcode.startswith("IMAD.HI"),
                               lambda h: kr.sass_cycles_per_iteration(h)[0], 2,
                               lambda i: i.opcode.startswith("LDG") and not i.opcode.endswith(".128"))
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
    assert kr.dense_lanes("scatter_dense_kernel<unsigned short, int, 2, 2>") == 8
    assert kr.dense_lanes("scatter_kernel<unsigned short, int, 2, 2>") is None


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
    code = kr.parse_sass(STAGED_TILE)["_Z1kv"]
    loop = kr.staged_tile_loop(code, kr.sass_is_store, kr.sass_keep,
                               lambda i: kr.sass_is_store(i) and i.opcode.endswith(".128"),
                               lambda i: i.opcode.startswith("BAR"),
                               lambda h: kr.sass_cycles_per_iteration(h)[0])
    # tile: IADD3, BRA, BAR, LDS, LD, STS, BAR, LDS.128, BRA, STG.128, BRA, BAR, ISETP, BRA
    # (IADD3 and ISETP integer: 4 cycles < 14 issued)
    assert loop["tile"] == {"instructions": 14, "cycles": 14}
    # the sources: IMAD.HI, LDG.E.64, STS.64
    assert loop["sources"] == {"instructions": 3, "cycles": 3}
    assert kr.staged_kernel("scatter_staged_kernel<unsigned short, int, 2, 2>")
    assert not kr.staged_kernel("scatter_dense_kernel<unsigned short, int, 2, 2>")


def test_stride_2_rows_that_fit_take_the_staged_walk():
    line = kr.read_seeds()[1]  # rows of 91, stride 2
    names = {"scatter_staged_kernel<unsigned short, int, 2, 2>": {},
             "interleave_staged_kernel<unsigned short, int, 2, 2, false>": {},
             "interleave_staged_kernel<unsigned short, int, 2, 3, true>": {}}
    names.update({f"{k}_{walk}kernel<unsigned short, int, {step}, {outer}>": {}
                  for k in ("scatter", "interleave") for walk in ("dense_", "")
                  for step, outer in ((2, 2), (1, 3))})
    for config in kr.kernel_configurations(line, 2, "nchw"):
        assert kr.staged_rows(config) == (91, 2)
        assert kr.instantiation_for(config, names).startswith(f"{config['kernel']}_staged_kernel<")
    # channels_last rows of a chunk or more (step 1) keep the dense walk; so do
    # rows whose tile spans more sources than a block's threads (2-byte rows
    # of 32: 129 rows x 2 > 256)
    for config in kr.kernel_configurations(line, 2, "channels_last"):
        assert not kr.staged_rows_fit(config)
        assert "_dense_kernel<" in kr.instantiation_for(config, names)
    short = {"row_length": 32, "row_step": 2, "element_bytes": 2}
    assert not kr.staged_rows_fit(short) and kr.staged_rows_fit({**short, "row_length": 33})
    # per warp and tile: the tile pass, plus the sources for the warps that
    # describe them: a tile of 4096 2-byte elements spans 46 rows of 91 wherever it
    # starts (45 x 91 = 4095), 92 sources: 3 warps of 32 (2 waves of 64) of the block's 8 (4)
    config = next(c for c in kr.kernel_configurations(line, 2, "nchw") if c["kernel"] == "interleave")
    loop = {"tile": {"instructions": 300, "cycles": 400}, "sources": {"instructions": 40, "cycles": 60}}
    spans = [(start + 4095) // 91 + 1 for start in range(91)]
    assert set(spans) == {46}
    instructions, cycles, elements = kr.staged_walk_cost(config, loop, 32)
    assert elements == 4096 / 8
    assert instructions == pytest.approx(300 + 3 / 8 * 40)
    assert cycles == pytest.approx(400 + 3 / 8 * 60)
    instructions, cycles, elements = kr.staged_walk_cost(config, loop, 64)
    assert elements == 4096 / 4 and cycles == pytest.approx(400 + 2 / 4 * 60)
    # 3 channels (line 7): the interleave stages rows along W (1450, stride 2) in
    # packets of the channels, 4350 elements each; the scatter's 32-channel rows stay dense
    line = kr.read_seeds()[6]
    interleave, scatter = kr.kernel_configurations(line, 2, "channels_last")
    assert kr.staged_rows(interleave) == (4350, 2) and not kr.staged_rows_fit(scatter)
    assert kr.instantiation_for(interleave, names) == \
        "interleave_staged_kernel<unsigned short, int, 2, 3, true>"


def run_shares_by_simulation(row_length, lanes, width, passes, interior, pieces, groups,
                             head=0, tail=0):
    """Every warp of `groups` runs of 64 threads, pass after pass, each thread
    keeping the row its last chunk left it in, as the kernels do."""
    names = ("setup", "interior", "pieces", "rowend", "walking", "crossings")
    totals, count = dict.fromkeys(names, 0), 0
    for g in range(groups):
        left = [None] * 64  # the row each lane's state holds
        for i in range(passes):
            taken = []
            for lane in range(64):
                first = (g * 64 * passes + lane + 64 * i) * lanes
                row, at = first // row_length, first % row_length
                inside = head <= at and at + lanes <= row_length - tail
                if interior and inside:
                    path, after = "interior", row
                elif pieces and row_length >= lanes:
                    path = "rowend" if at + lanes > row_length else "pieces"
                    after = row + 1 if path == "rowend" else row
                else:
                    path, after = "walking", (first + lanes) // row_length
                ends = {e for e in range(lanes) if (first + e + 1) % row_length == 0}
                taken.append((path, left[lane] != row, ends))
                left[lane] = after
            for w in range(0, 64, width):
                warp = taken[w:w + width]
                paths = {p for p, _, _ in warp}
                totals["setup"] += any(s for _, s, _ in warp)
                totals["interior"] += "interior" in paths
                totals["pieces"] += bool(paths & {"pieces", "rowend"})
                totals["rowend"] += "rowend" in paths
                totals["walking"] += "walking" in paths
                totals["crossings"] += len({e for p, _, ends in warp if p == "walking" for e in ends})
                count += 1
    return {key: value / count for key, value in totals.items()}


@pytest.mark.parametrize("row_length, lanes, width, passes", [
    (50, 8, 32, 6), (91, 8, 64, 4), (3, 4, 32, 3), (2016, 8, 32, 8), (1452, 4, 64, 5),
    (256, 8, 32, 2), (7, 8, 32, 1), (725, 2, 64, 8)])
@pytest.mark.parametrize("interior, pieces", [(False, False), (True, True), (True, False)])
def test_run_shares(row_length, lanes, width, passes, interior, pieces):
    shares = kr.run_shares(row_length, lanes, width, passes, interior, pieces)
    groups = max(4 * row_length // math.gcd(row_length, 64 * lanes * passes), 8)
    expected = run_shares_by_simulation(row_length, lanes, width, passes, interior, pieces,
                                        min(groups, 400))
    assert shares == pytest.approx(expected, abs=0.03)


@pytest.mark.parametrize("row_length, lanes, head, tail", [
    (202, 8, 1, 2), (1452, 8, 1, 2), (1452, 4, 1, 2), (50, 8, 0, 9), (725, 8, 17, 0), (31, 4, 3, 3)])
def test_run_shares_with_row_edges(row_length, lanes, head, tail):
    shares = kr.run_shares(row_length, lanes, 32, 4, True, True, head, tail)
    groups = min(max(4 * row_length // math.gcd(row_length, 64 * lanes * 4), 8), 400)
    assert shares == pytest.approx(
        run_shares_by_simulation(row_length, lanes, 32, 4, True, True, groups, head, tail), abs=0.03)


def test_long_rows_set_up_once_per_row():
    # rows of 20000 2-byte elements: a lane moves 512 elements a pass, so a warp
    # of 32 sets up where one of its lanes crossed a row start: about
    # (512 + 256) / 20000 of the passes, plus every lane's first pass
    shares = kr.run_shares(20000, 8, 32, 16, True, True)
    assert shares["setup"] == pytest.approx(1 / 16 + 15 / 16 * 768 / 20000, rel=0.05)
    assert shares["interior"] == pytest.approx(1, abs=0.02)
    # rows shorter than a pass: every pass sets up
    assert kr.run_shares(100, 8, 32, 16, True, True)["setup"] == 1


def test_dense_passes():
    assert kr.dense_passes(1) == 1
    assert kr.dense_passes(64 * 16384) == 1 and kr.dense_passes(64 * 16384 + 1) == 2
    assert kr.dense_passes(2 ** 31) == 64


def test_dense_configurations_take_the_dense_walk():
    line = kr.read_seeds()[2]  # rows of 50
    scatter = next(c for c in kr.kernel_configurations(line, 2, "nchw") if c["kernel"] == "scatter")
    assert scatter["dense"]
    names = {"scatter_dense_kernel<unsigned short, int, 2, 2>": {},
             "scatter_kernel<unsigned short, int, 2, 2>": {}}
    assert kr.instantiation_for(scatter, names) == "scatter_dense_kernel<unsigned short, int, 2, 2>"
    assert kr.instantiation_for({**scatter, "dense": False}, names) == \
        "scatter_kernel<unsigned short, int, 2, 2>"
    interleave = next(c for c in kr.kernel_configurations(line, 2, "nchw") if c["kernel"] == "interleave")
    assert kr.instantiation_for(interleave, {"interleave_dense_kernel<unsigned short, int, 2, 2>": {}}) == \
        "interleave_dense_kernel<unsigned short, int, 2, 2>"
    # interleave rows of 50 (no row head or tail): each path's cost by its share of passes
    cost = lambda n: {"instructions": n, "cycles": 2 * n}
    loop = {"setup": cost(100), "interior": cost(30), "pieces": cost(60), "rowend": cost(90),
            "chunk": cost(300), "crossing": cost(40)}
    passes = kr.dense_passes(-(-interleave["written"] // 8))
    shares = run_shares_by_simulation(50, 8, 32, passes, True, True, 50)
    instructions, cycles, elements = kr.dense_walk_cost(interleave, loop, 32)
    expected = (100 * shares["setup"] + 30 * shares["interior"] + 60 * shares["pieces"]
                + 90 * shares["rowend"])
    assert elements == 256 and instructions == pytest.approx(expected, rel=0.03)
    assert cycles == pytest.approx(2 * instructions)
    assert shares["walking"] == 0 and shares["setup"] == 1
    # a path the walk takes but the kernel lacks is an error, not a free pass
    with pytest.raises(ValueError):
        kr.dense_walk_cost(interleave, {**loop, "rowend": None}, 32)
    # 3x3, padding 1, stride 2 over W = 200: buffer rows of 202, values at 1, 3, ... 199
    line = kr.read_seeds()[5]
    scatter = next(c for c in kr.kernel_configurations(line, 2, "nchw") if c["kernel"] == "scatter")
    assert (scatter["row_length"], scatter["row_head"], scatter["row_tail"]) == (202, 1, 2)
    assert scatter["live_rows"] == pytest.approx(100 / 202)
