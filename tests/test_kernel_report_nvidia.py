"""The kernel report's reading of ptxas -v (tools/kernel_report/nvidia.py)."""
from kernel_report import nvidia


PTXAS = """\
ptxas info    : Compiling entry function '_Z1kv' for 'sm_90'
ptxas info    : Function properties for _Z1kv
    40 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 28 registers, used 1 barriers, 40 bytes cumulative stack size, 8704 bytes smem
"""


def test_ptxas_resources():
    assert nvidia.parse_ptxas(PTXAS) == {"sm_90": {"_Z1kv": {
        "registers": 28, "stack": 40, "spill_stores": 8, "spill_loads": 12, "smem": 8704}}}


# One compile for two architectures, with a device function ptxas compiled
# apart between the kernel's entry and its register count.
TWO_ARCHITECTURES = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z1kv' for 'sm_80'
ptxas info    : Function properties for _Z1kv
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 16 registers, used 0 barriers, 360 bytes cmem[0]
ptxas info    : Compiling entry function '_Z1kv' for 'sm_90'
ptxas info    : Function properties for _Z6helperv
    24 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads
ptxas info    : Function properties for _Z1kv
    8 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 20 registers, used 1 barriers, 4096 bytes smem
"""


def test_ptxas_resources_per_architecture_and_only_the_kernels_own_frame():
    resources = nvidia.parse_ptxas(TWO_ARCHITECTURES)
    assert resources["sm_80"]["_Z1kv"] == {
        "registers": 16, "stack": 0, "spill_stores": 0, "spill_loads": 0, "smem": 0}
    assert resources["sm_90"]["_Z1kv"] == {
        "registers": 20, "stack": 8, "spill_stores": 0, "spill_loads": 0, "smem": 4096}


SASS = """\
\t\tFunction : _Z1kv
        /*0000*/                   S2R R0, SR_TID.X ;
        /*0010*/               @P0 EXIT ;
        /*0020*/                   HMMA.16816.F32 R4, R8, R12, R4 ;
        /*0030*/               @!P1 HMMA.16816.F32 R4, R8, R14, R4 ;
        /*0040*/                   STG.E [R4.64], R2 ;
        /*0050*/                   BRA 0x50 ;
        /*0060*/                   NOP ;
"""


def test_sass_instructions():
    opcodes = nvidia.parse_sass(SASS)["_Z1kv"]
    assert opcodes[:3] == ["S2R", "EXIT", "HMMA.16816.F32"]
    assert nvidia.nv_code_facts(opcodes) == {"instructions": 6}
