"""The rules of --check (tools/kernel_report/gates.py) on hand-made kernel records."""
from kernel_report import gates


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
    assert gates.violations(clean) == []
    broken = [
        kernel("scatter_kernel<unsigned short, int>", "data_movement", {"stack": 40}),
        kernel("interleave_kernel<unsigned short, int>", "data_movement", None,
               {"group_segment_fixed_size": 24576}),
        kernel("splitk_partials_kernel<float, float>", "splitk", {"spill_stores": 48, "smem": 8704},
               {"group_segment_fixed_size": 8704, "mfma_instructions": 4}),
    ]
    found = gates.violations(broken)
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
    found = gates.violations(low)
    assert any("[sm_90]: modelled occupancy 38%" in f for f in found)
    assert any("[gfx940]: modelled occupancy 38%" in f for f in found)
    assert not any("splitk_partials_kernel<float, float> [sm_90]: modelled occupancy" in f
                   for f in found)  # the occupancy rule is for data movement
    data_movement = gates.violations(low, ("data_movement",))
    assert data_movement and all("interleave" in f for f in data_movement)
    assert all("interleave" not in f for f in gates.violations(low, ("splitk",)))


def test_the_splitk_reduce_alone_is_no_product_kernel():
    # no tensor-core rule applies to it
    assert gates.violations([kernel("splitk_reduce_kernel<float, float>", "splitk")]) == []

