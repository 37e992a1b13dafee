"""Kernel names as the report gives them (tools/kernel_report/compilers.py)."""
from kernel_report import compilers


def test_demangled_names_match_across_vendors():
    assert compilers.short_name("void bwdconv::hip::(anonymous namespace)::interleave_kernel"
                                "<unsigned short, int>(bwdconv::hip::InterleaveParams, long)") == \
        "interleave_kernel<unsigned short, int>"
