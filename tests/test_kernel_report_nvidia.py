"""The kernel report's reading of ptxas -v (tools/kernel_report/nvidia.py)."""
from kernel_report import nvidia


PTXAS = """\
ptxas info    : Compiling entry function '_Z1kv' for 'sm_90'
ptxas info    : Function properties for _Z1kv
    40 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 28 registers, used 1 barriers, 40 bytes cumulative stack size, 8704 bytes smem
"""


def test_ptxas_resources():
    assert nvidia.parse_ptxas(PTXAS)["_Z1kv"] == {
        "registers": 28, "stack": 40, "spill_stores": 8, "spill_loads": 12, "smem": 8704}
