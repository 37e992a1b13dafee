"""The rules of --check (tools/kernel_report/gates.py) on hand-made kernel records."""
from kernel_report import gates


def kernel(name, role="data_movement", sm90=None, gfx940=None):
    base_nv = {"registers": 32, "stack": 0, "spill_stores": 0, "spill_loads": 0, "smem": 0}
    base_amd = {"vgpr_count": 32, "agpr_count": 0, "sgpr_count": 40, "group_segment_fixed_size": 0,
                "private_segment_fixed_size": 0, "vgpr_spill_count": 0, "sgpr_spill_count": 0}
    return {"kernel": name, "role": role, "targets": {"sm_90": {**base_nv, **(sm90 or {})},
                                                      "gfx940": {**base_amd, **(gfx940 or {})}}}


def test_rules():
    assert gates.violations([kernel("scatter_kernel<unsigned short, int>")]) == []
    broken = [
        kernel("scatter_kernel<unsigned short, int>", sm90={"stack": 40}),
        kernel("interleave_kernel<unsigned short, int>", gfx940={"group_segment_fixed_size": 24576}),
        kernel("relayout_kernel<unsigned short>", sm90={"spill_stores": 48, "smem": 8704},
               gfx940={"group_segment_fixed_size": 8704, "private_segment_fixed_size": 16}),
    ]
    found = gates.violations(broken)
    assert any("scatter_kernel<unsigned short, int> [sm_90]: 40 B stack frame" in f for f in found)
    assert any("24576 B of it made by the compiler" in f for f in found)
    assert any("spills 48 B" in f for f in found)
    assert any("relayout_kernel<unsigned short> [gfx940]: 16 B scratch" in f for f in found)
    # shared memory a kernel declares is not compiler-made LDS
    assert not any("8704 B LDS" in f for f in found)


def test_occupancy_rule_and_roles():
    # 72 registers: 3 blocks of 8 warps on sm_90 (37.5%); 136 VGPRs: 3 waves per SIMD on gfx940
    low = [kernel("interleave_kernel<unsigned short, int, 2, 2>", sm90={"registers": 72},
                  gfx940={"vgpr_count": 136}),
           kernel("block_reverse_kernel", "other", sm90={"registers": 72, "stack": 40})]
    found = gates.violations(low)
    assert any("[sm_90]: modelled occupancy 38%" in f for f in found)
    assert any("[gfx940]: modelled occupancy 38%" in f for f in found)
    assert all("block_reverse" not in f for f in found)  # the rules are the data movement's
