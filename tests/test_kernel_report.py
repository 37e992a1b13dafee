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
DENSE = """\
\t\tFunction : _Z1kv
        /*0000*/                   S2R R0, SR_TID.X ;
        /*0010*/                   ISETP.GE.AND P0, PT, R0, c[0x0][0x10], PT ;
        /*0020*/               @P0 EXIT ;
        /*0030*/                   IMAD.HI.U32 R1, R0, R2, RZ ;
        /*0040*/                   IADD3 R3, R1, 0x1, RZ ;
        /*0050*/               @P1 BRA 0x80 ;
        /*0060*/                   IMAD.HI.U32 R4, R3, R2, RZ ;
        /*0070*/                   IADD3 R5, R4, 0x1, RZ ;
        /*0080*/                   IADD3 R6, R3, 0x2, RZ ;
        /*0090*/               @P2 BRA 0xc0 ;
        /*00a0*/                   STG.E.128 desc[UR4][R8.64], R4 ;
        /*00b0*/                   BRA 0xd0 ;
        /*00c0*/                   STG.E.U16 desc[UR4][R8.64], R4 ;
        /*00d0*/                   IADD3 R0, R0, 0x100, RZ ;
        /*00e0*/                   ISETP.LT.AND P3, PT, R0, 0x10, PT ;
        /*00f0*/               @P3 BRA 0x30 ;
        /*0100*/                   EXIT ;
"""


def test_dense_chunk_loop():
    code = kr.parse_sass(DENSE)["_Z1kv"]
    loop = kr.dense_chunk_loop(code, kr.sass_is_store, kr.sass_keep,
                               lambda i: kr.sass_is_store(i) and i.opcode.endswith(".128"),
                               lambda i: i.opcode.startswith("LDG") and i.opcode.endswith(".128"),
                               lambda i: i.opcode.startswith("IMAD.HI"),
                               lambda h: kr.sass_cycles_per_iteration(h)[0], 2)
    # IMAD.HI, IADD3, BRA, IADD3, BRA, STG.128, BRA, IADD3, ISETP, BRA: 5 on the
    # half-rate integer pipe, so 10 cycles either way
    assert loop["chunk"] == {"instructions": 10, "cycles": 10}
    # the site adds IMAD.HI and IADD3: 12 issued, 7 integer -> 14 cycles
    assert loop["crossing"] == {"instructions": 2, "cycles": 4}
    assert loop["crossing_sites"] == 1 and not loop["element_loop"]
    assert kr.dense_lanes("scatter_dense_kernel<unsigned short, int, 2>") == 8
    assert kr.dense_lanes("scatter_kernel<unsigned short, int, 2, 2>") is None


def chunk_shares_by_walking(row_length, lanes, width, sites, interior, warps, head=0, tail=0):
    """Every chunk of `warps` warps in turn, each element asked whether it ends a row
    or lies in a row's first `head` or last `tail` elements."""
    shares = {"interior": 0, "walking": 0, "crossings": 0}
    edge = lambda i: i % row_length < head or i % row_length >= row_length - tail
    for w in range(warps):
        firsts = [(w * width + c) * lanes for c in range(width)]
        chunks = [[e for e in range(lanes) if (f + e + 1) % row_length == 0] for f in firsts]
        edges = [any(edge(f + e) for e in range(lanes)) for f in firsts]
        walks = [ends for ends, at_edge in zip(chunks, edges)
                 if any(e < lanes - 1 for e in ends) or at_edge or not interior]
        shares["walking"] += bool(walks)
        shares["interior"] += interior and len(walks) < width
        shares["crossings"] += len({e for ends in walks for e in ends if e < sites})
    return {key: value / warps for key, value in shares.items()}


@pytest.mark.parametrize("row_length, lanes, width, sites", [
    (50, 8, 32, 7), (91, 8, 64, 8), (3, 4, 32, 3), (2016, 8, 32, 7), (1452, 4, 64, 4),
    (256, 8, 32, 7), (7, 8, 32, 8), (100, 2, 32, 1)])
@pytest.mark.parametrize("interior", [False, True])
def test_chunk_shares(row_length, lanes, width, sites, interior):
    warps = row_length // math.gcd(row_length, width * lanes) * 2  # two whole periods
    shares = kr.chunk_shares(row_length, lanes, width, sites, interior)
    expected = chunk_shares_by_walking(row_length, lanes, width, sites, interior, warps)
    assert shares == pytest.approx(expected)


@pytest.mark.parametrize("row_length, lanes, head, tail", [
    (202, 8, 1, 2), (1452, 8, 1, 2), (1452, 4, 1, 2), (50, 8, 0, 9), (725, 8, 17, 0), (31, 4, 3, 3)])
def test_chunk_shares_with_row_edges(row_length, lanes, head, tail):
    warps = row_length // math.gcd(row_length, 32 * lanes) * 2
    shares = kr.chunk_shares(row_length, lanes, 32, lanes, True, head, tail)
    assert shares == pytest.approx(
        chunk_shares_by_walking(row_length, lanes, 32, lanes, True, warps, head, tail))


def test_dense_configurations_take_the_dense_walk():
    line = kr.read_seeds()[2]  # rows of 50
    scatter = next(c for c in kr.kernel_configurations(line, 2, "nchw") if c["kernel"] == "scatter")
    assert scatter["dense"]
    names = {"scatter_dense_kernel<unsigned short, int, 2>": {},
             "scatter_kernel<unsigned short, int, 2, 2>": {}}
    assert kr.instantiation_for(scatter, names) == "scatter_dense_kernel<unsigned short, int, 2>"
    assert kr.instantiation_for({**scatter, "dense": False}, names) == \
        "scatter_kernel<unsigned short, int, 2, 2>"
    interleave = next(c for c in kr.kernel_configurations(line, 2, "nchw") if c["kernel"] == "interleave")
    assert kr.instantiation_for(interleave, {"interleave_dense_kernel<unsigned short, int, 2, 2>": {}}) == \
        "interleave_dense_kernel<unsigned short, int, 2, 2>"
    loop = {"chunk": {"instructions": 300, "cycles": 500},
            "crossing": {"instructions": 40, "cycles": 80}, "crossing_sites": 7, "element_loop": False}
    # rows of 50 against 256 elements per warp: every warp walks, each row end a crossing
    instructions, cycles, elements = kr.dense_walk_cost(scatter, loop, 32)
    shares = chunk_shares_by_walking(50, 8, 32, 7, False, 50)
    assert elements == 256 and cycles == pytest.approx(500 + 80 * shares["crossings"])
    assert instructions == pytest.approx(300 + 40 * shares["crossings"])
    # with an interior path, warps with a chunk off any row end issue it as well
    interior = {**loop, "interior": {"instructions": 30, "cycles": 40}}
    shares = chunk_shares_by_walking(50, 8, 32, 7, True, 50)
    assert kr.dense_walk_cost(scatter, interior, 32)[1] == pytest.approx(
        500 * shares["walking"] + 80 * shares["crossings"] + 40 * shares["interior"])
    assert 0 < shares["interior"] <= 1 and shares["walking"] == 1
    # 3x3, padding 1, stride 2 over W = 200: buffer rows of 202, values at 1, 3, ... 199
    line = kr.read_seeds()[5]
    scatter = next(c for c in kr.kernel_configurations(line, 2, "nchw") if c["kernel"] == "scatter")
    assert (scatter["row_length"], scatter["row_head"], scatter["row_tail"]) == (202, 1, 2)
    assert scatter["live_rows"] == pytest.approx(100 / 202)


# The same walk with the element loop kept (0x50..0xa0, two passes) and its
# row setup inside it.
DENSE_ROLLED = """\
\t\tFunction : _Z1kv
        /*0000*/                   S2R R0, SR_TID.X ;
        /*0010*/                   ISETP.GE.AND P0, PT, R0, c[0x0][0x10], PT ;
        /*0020*/               @P0 EXIT ;
        /*0030*/                   IMAD.HI.U32 R1, R0, R2, RZ ;
        /*0040*/                   MOV R7, RZ ;
        /*0050*/                   IADD3 R3, R3, 0x1, RZ ;
        /*0060*/               @P1 BRA 0x80 ;
        /*0070*/                   IMAD.HI.U32 R4, R3, R2, RZ ;
        /*0080*/                   IADD3 R7, R7, 0x1, RZ ;
        /*0090*/                   ISETP.LT.AND P4, PT, R7, 0x2, PT ;
        /*00a0*/               @P4 BRA 0x50 ;
        /*00b0*/                   STG.E.128 desc[UR4][R8.64], R4 ;
        /*00c0*/                   IADD3 R0, R0, 0x100, RZ ;
        /*00d0*/                   ISETP.LT.AND P3, PT, R0, 0x10, PT ;
        /*00e0*/               @P3 BRA 0x30 ;
        /*00f0*/                   EXIT ;
"""


def test_dense_chunk_loop_with_the_element_loop_kept():
    code = kr.parse_sass(DENSE_ROLLED)["_Z1kv"]
    loop = kr.dense_chunk_loop(code, kr.sass_is_store, kr.sass_keep,
                               lambda i: kr.sass_is_store(i) and i.opcode.endswith(".128"),
                               lambda i: i.opcode.startswith("LDG") and i.opcode.endswith(".128"),
                               lambda i: i.opcode.startswith("IMAD.HI"),
                               lambda h: kr.sass_cycles_per_iteration(h)[0], 2)
    # the chunk loop without the element loop: IMAD.HI, MOV, STG.128, IADD3,
    # ISETP, BRA; two element passes: IADD3, BRA, IADD3, ISETP, BRA each.
    # 16 issued, 4 + 2 x 3 integer -> 20 cycles
    assert loop["chunk"] == {"instructions": 16, "cycles": 20}
    assert loop["crossing"] == {"instructions": 1, "cycles": 2}
    assert loop["crossing_sites"] == 1 and loop["element_loop"]


# The kept element loop (0xe0..0x130) behind a branch: a chunk inside its
# row's interior skips it, copied by one 16-byte load (0x60) or gathered
# element by element (0x90), as the interleave's dense walk does.
DENSE_INTERIOR = """\
\t\tFunction : _Z1kv
        /*0000*/                   S2R R0, SR_TID.X ;
        /*0010*/                   ISETP.GE.AND P0, PT, R0, c[0x0][0x10], PT ;
        /*0020*/               @P0 EXIT ;
        /*0030*/                   IMAD.HI.U32 R1, R0, R2, RZ ;
        /*0040*/               @P5 BRA 0xd0 ;
        /*0050*/               @P6 BRA 0x90 ;
        /*0060*/                   LDG.E.128 R4, desc[UR4][R10.64] ;
        /*0070*/                   STG.E.128 desc[UR4][R8.64], R4 ;
        /*0080*/                   BRA 0x150 ;
        /*0090*/                   LDG.E.U16 R4, desc[UR4][R10.64] ;
        /*00a0*/                   LDG.E.U16 R5, desc[UR4][R12.64] ;
        /*00b0*/                   STG.E.128 desc[UR4][R8.64], R4 ;
        /*00c0*/                   BRA 0x150 ;
        /*00d0*/                   MOV R7, RZ ;
        /*00e0*/                   IADD3 R3, R3, 0x1, RZ ;
        /*00f0*/               @P1 BRA 0x110 ;
        /*0100*/                   IMAD.HI.U32 R4, R3, R2, RZ ;
        /*0110*/                   IADD3 R7, R7, 0x1, RZ ;
        /*0120*/                   ISETP.LT.AND P4, PT, R7, 0x2, PT ;
        /*0130*/               @P4 BRA 0xe0 ;
        /*0140*/                   STG.E.128 desc[UR4][R8.64], R4 ;
        /*0150*/                   IADD3 R0, R0, 0x100, RZ ;
        /*0160*/                   ISETP.LT.AND P3, PT, R0, 0x10, PT ;
        /*0170*/               @P3 BRA 0x30 ;
        /*0180*/                   EXIT ;
"""


def test_dense_chunk_loop_interior_and_copy_paths():
    code = kr.parse_sass(DENSE_INTERIOR)["_Z1kv"]
    loop = kr.dense_chunk_loop(code, kr.sass_is_store, kr.sass_keep,
                               lambda i: kr.sass_is_store(i) and i.opcode.endswith(".128"),
                               lambda i: i.opcode.startswith("LDG") and i.opcode.endswith(".128"),
                               lambda i: i.opcode.startswith("IMAD.HI"),
                               lambda h: kr.sass_cycles_per_iteration(h)[0], 2)
    # IMAD.HI, BRA, MOV, STG.128, IADD3, ISETP, BRA and two passes of IADD3,
    # BRA, IADD3, ISETP, BRA: 17 issued, 10 integer -> 20 cycles
    assert loop["chunk"] == {"instructions": 17, "cycles": 20}
    assert loop["crossing"] == {"instructions": 1, "cycles": 2}
    # IMAD.HI, BRA, BRA, two LDG.U16, STG.128, BRA, IADD3, ISETP, BRA
    assert loop["interior"] == {"instructions": 10, "cycles": 10}
    # IMAD.HI, BRA, BRA, LDG.128, STG.128, BRA, IADD3, ISETP, BRA
    assert loop["copy"] == {"instructions": 9, "cycles": 9}
