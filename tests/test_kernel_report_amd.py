"""The kernel report's reading of hipcc's assembly and AMDGPU metadata, and
the modelled issue cycles on an MI300X SIMD (tools/kernel_report/amd.py)."""
from kernel_report import amd, loops


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


def test_amd_loop_metadata_and_cycles():
    code = amd.parse_amd_code(AMD)["_Z1kv"]
    loop = loops.per_element_loop(code, amd.amd_is_store, amd.amd_keep, lambda i: False,
                                  lambda i: False, lambda h: amd.amd_cycles_per_iteration(h)[0])
    assert (loop["longest"], loop["shortest"], loop["inner_loops"]) == (4, 4, 0)
    # one full-rate VALU, one quarter-rate multiply
    assert loop["paths"]["any"] == {"instructions": 4, "cycles": 4 + 16}
    cycles, classes = amd.amd_cycles_per_iteration({"v_add_u32_e32": 1, "v_mul_lo_u32": 1,
                                                    "global_store_dword": 1, "s_cbranch_vccnz": 1})
    assert classes == {"valu": 2, "vmem": 1, "branch_message": 1}
    meta = amd.parse_amd_metadata(AMD)["_Z1kv"]
    assert meta["group_segment_fixed_size"] == 6144 and meta["vgpr_spill_count"] == 2
    assert meta["private_segment_fixed_size"] == 16
