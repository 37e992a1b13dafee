"""The kernel report's reading of the CMake build (tools/kernel_report/builds.py):
kernel names, the compilers the build used, and one record per kernel from
the files the build wrote, or a clear error where one is missing."""
import os

import pytest

from kernel_report import builds
from kernel_report.devices import AMD_ARCHS, NV_ARCHS
from test_kernel_report_amd import AMD
from test_kernel_report_nvidia import PTXAS


def test_demangled_names_match_across_vendors():
    assert builds.short_name("void bwdconv::hip::(anonymous namespace)::interleave_kernel"
                             "<unsigned short, int>(bwdconv::hip::InterleaveParams, long)") == \
        "interleave_kernel<unsigned short, int>"


def cmake_cache(build, cuda="ON", hip="ON"):
    build.mkdir(parents=True, exist_ok=True)
    (build / "CMakeCache.txt").write_text(
        f"BWDCONV_CUDA:BOOL={cuda}\nNVCC_EXECUTABLE:FILEPATH=/usr/local/cuda/bin/nvcc\n"
        f"BWDCONV_HIP:BOOL={hip}\nHIPCC_EXECUTABLE:FILEPATH=/usr/bin/hipcc\n"
        "CUOBJDUMP_UNUSED:FILEPATH=CUOBJDUMP_UNUSED-NOTFOUND\n")


def test_the_compilers_are_those_of_the_vendors_the_build_compiles_for(tmp_path):
    cmake_cache(tmp_path, cuda="OFF")
    tools = builds.Tools.discover(tmp_path)
    assert tools.nvcc is None and tools.hipcc == "/usr/bin/hipcc"
    assert builds.cmake_cache_value(tmp_path, "CUOBJDUMP_UNUSED") is None
    assert builds.Tools.discover(tmp_path / "unconfigured").hipcc is None


def kernel_build(build, kernels):
    """The files CMakeLists.txt's kernel compiles write, for `kernels`: every
    architecture's ptxas lines in one log (PTXAS's kernel, once per sm_XX) and
    AMD's assembly per gfx target."""
    cmake_cache(build)
    for name in kernels:
        _, log = builds.cuda_outputs(build, name)
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text("".join(PTXAS.replace("sm_90", arch) for arch in NV_ARCHS))
        for arch in AMD_ARCHS:
            asm = builds.hip_assembly(build, name, arch)
            asm.parent.mkdir(parents=True, exist_ok=True)
            asm.write_text(AMD)


def kernel_sources(tmp_path, monkeypatch, names):
    sources = tmp_path / "csrc"
    sources.mkdir()
    for name in names:
        (sources / f"{name}.cu").write_text("")
    monkeypatch.setattr(builds, "KERNEL_DIR", sources)


def tools_without_disassembly(build):
    return builds.Tools(nvcc="nvcc", cuobjdump=None, hipcc="hipcc", cxxfilt=None)


def test_one_record_per_kernel_with_every_target_read_from_the_build(tmp_path, monkeypatch):
    kernel_sources(tmp_path, monkeypatch, ["interleave", "block_reverse"])
    kernel_build(tmp_path / "build", ["interleave", "block_reverse"])
    kernels = builds.collect(tools_without_disassembly(tmp_path), tmp_path / "build")
    assert [(k["source"], k["kernel"], k["role"]) for k in kernels] == [
        ("block_reverse.cu", "_Z1kv", "other"), ("interleave.cu", "_Z1kv", "data_movement")]
    targets = kernels[1]["targets"]
    assert sorted(targets) == sorted(NV_ARCHS + AMD_ARCHS)
    assert targets["sm_80"]["registers"] == targets["sm_90"]["registers"] == 28
    assert targets["gfx940"]["group_segment_fixed_size"] == 6144
    assert targets["gfx90a"]["instructions"] > 0  # the assembly's facts


def test_a_missing_output_or_architecture_says_what_to_build(tmp_path, monkeypatch):
    kernel_sources(tmp_path, monkeypatch, ["scatter"])
    build = tmp_path / "build"
    kernel_build(build, ["scatter"])
    builds.hip_assembly(build, "scatter", AMD_ARCHS[-1]).unlink()
    with pytest.raises(builds.MissingBuild, match="cmake --build"):
        builds.collect(tools_without_disassembly(tmp_path), build)
    _, log = builds.cuda_outputs(build, "scatter")
    log.write_text(PTXAS.replace("sm_90", NV_ARCHS[0]))
    with pytest.raises(builds.MissingBuild, match=f"no kernel for {NV_ARCHS[-1]}"):
        builds.collect(tools_without_disassembly(tmp_path), build)


def test_the_sass_listing_is_made_again_only_when_the_object_changed(tmp_path):
    calls = tmp_path / "calls"
    cuobjdump = tmp_path / "cuobjdump"
    cuobjdump.write_text(f"#!/bin/sh\necho call >> {calls}\necho \"listing of $4 for $3\"\n")
    cuobjdump.chmod(0o755)
    tools = builds.Tools(nvcc="nvcc", cuobjdump=str(cuobjdump), hipcc=None, cxxfilt=None)
    obj = tmp_path / "scatter.o"
    obj.write_bytes(b"first")
    first = builds.sass_listing(tools, obj, "sm_90")
    assert first == f"listing of {obj} for sm_90\n"
    assert builds.sass_listing(tools, obj, "sm_90") == first
    assert calls.read_text().count("call") == 1  # kept beside the object
    listing = tmp_path / "scatter.sm_90.sass"
    os.utime(obj, (listing.stat().st_mtime + 1, listing.stat().st_mtime + 1))  # rebuilt
    builds.sass_listing(tools, obj, "sm_90")
    assert calls.read_text().count("call") == 2
