"""The kernel report's reading of hipcc's assembly and AMDGPU metadata
(tools/kernel_report/amd.py)."""
from kernel_report import amd


AMD = """\
_Z1kv:                                  ; @_Z1kv
; %bb.0:
\ts_load_dword s4, s[0:1], 0x0
\tv_mov_b32_e32 v1, 0
.LBB0_1:                                ; =>This Inner Loop Header: Depth=1
\tv_add_u32_e32 v1, 1, v1
\tv_mul_lo_u32 v2, v1, 3
\tv_mfma_f32_32x32x8f16 a[0:15], v[2:3], v[4:5], a[0:15]
\ts_nop 7
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


def test_amd_metadata_and_code():
    opcodes = amd.parse_amd_code(AMD)["_Z1kv"]
    assert opcodes[:2] == ["s_load_dword", "v_mov_b32_e32"] and opcodes[-1] == "s_endpgm"
    assert amd.amd_code_facts(opcodes) == {"instructions": 8}
    meta = amd.parse_amd_metadata(AMD)["_Z1kv"]
    assert meta["group_segment_fixed_size"] == 6144 and meta["vgpr_spill_count"] == 2
    assert meta["private_segment_fixed_size"] == 16
