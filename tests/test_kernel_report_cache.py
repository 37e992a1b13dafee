"""The compile cache's key and entries (tools/kernel_report/cache.py): any change
to what can change a compiler's output gives another key; a hit gives back
what was stored; pruning after a run keeps the entries that run used and
removes the others."""
import subprocess

from kernel_report import cache

COMMAND = ["/usr/local/cuda/bin/nvcc", "-O3", "-arch=sm_90", "-cubin", "-Icsrc", "csrc/hip/a.cu",
           "-o", "<work>/a.sm_90.cubin"]
VERSION = "Cuda compilation tools, release 12.4, V12.4.131"
ENVIRONMENT = {"NVCC_APPEND_FLAGS": "-lineinfo"}
INPUTS = {"csrc/hip/a.cu": b"#include \"bits.h\"\n__global__ void k() {}\n",
          "csrc/hip/bits.h": b"#pragma once\nconstexpr int kBits = 8;\n"}


def key(command=COMMAND, version=VERSION, environment=ENVIRONMENT, inputs=INPUTS):
    return cache.compile_key(command, version, environment, inputs)


def with_byte_changed(inputs, name):
    changed = dict(inputs)
    changed[name] = changed[name].replace(b"8", b"9")
    assert changed[name] != inputs[name]
    return changed


def test_same_inputs_give_the_same_key():
    assert key() == key(list(COMMAND), str(VERSION), dict(ENVIRONMENT), dict(reversed(INPUTS.items())))


def test_a_changed_source_byte_changes_the_key():
    changed = dict(INPUTS)
    changed["csrc/hip/a.cu"] = changed["csrc/hip/a.cu"].replace(b"k()", b"j()")
    assert key(inputs=changed) != key()


def test_a_changed_header_byte_changes_the_key():
    assert key(inputs=with_byte_changed(INPUTS, "csrc/hip/bits.h")) != key()


def test_a_new_header_changes_the_key():
    assert key(inputs={**INPUTS, "csrc/hip/new.h": b""}) != key()


def test_a_changed_flag_changes_the_key():
    assert key(command=[a.replace("-O3", "-O2") for a in COMMAND]) != key()
    assert key(command=[a.replace("sm_90", "sm_80") for a in COMMAND]) != key()


def test_a_changed_compiler_version_changes_the_key():
    assert key(version=VERSION.replace("V12.4.131", "V12.4.99")) != key()


def test_a_changed_flag_variable_changes_the_key():
    assert key(environment={}) != key()


def test_work_paths_are_placeholders_and_include_dirs_are_read(tmp_path):
    (tmp_path / "inc" / "sub").mkdir(parents=True)
    (tmp_path / "inc" / "sub" / "h.h").write_bytes(b"x")
    source = tmp_path / "a.cu"
    source.write_bytes(b"y")
    command = ["nvcc", f"-I{tmp_path / 'inc'}", str(source), "-o", str(tmp_path / "work" / "a.cubin")]
    assert cache.key_command(command, tmp_path / "work") == command[:-1] + ["<work>/a.cubin"]
    assert cache.source_inputs(source, command) == {str(source): b"y",
                                                    str(tmp_path / "inc" / "sub" / "h.h"): b"x"}


def test_only_flag_and_toolkit_variables_are_keyed():
    assert cache.keyed_environment({"NVCC_PREPEND_FLAGS": "-G", "HIP_PATH": "/opt/rocm",
                                    "HOME": "/root", "PATH": "/bin"}) == \
        {"NVCC_PREPEND_FLAGS": "-G", "HIP_PATH": "/opt/rocm"}


def test_a_hit_restores_the_outputs_and_what_was_printed(tmp_path):
    output = tmp_path / "a.s"
    runs = []

    def produce():
        runs.append(1)
        output.write_text("asm")
        return subprocess.CompletedProcess([], 0, "out", "ptxas info")

    first = cache.cached_run(tmp_path / "cache", "ab" * 32, [output], produce)
    output.unlink()
    second = cache.cached_run(tmp_path / "cache", "ab" * 32, [output], produce)
    assert len(runs) == 1
    assert (second.stdout, second.stderr) == (first.stdout, first.stderr) == ("out", "ptxas info")
    assert output.read_text() == "asm"
    assert not list((tmp_path / "cache" / "ab").glob(".partial-*"))


def entries(directory):
    return sorted(p.name for p in directory.glob("*/*"))


def test_prune_keeps_the_entries_this_run_used_and_removes_an_earlier_runs_others(tmp_path):
    directory = tmp_path / "cache"
    output = tmp_path / "a.s"
    hit, dropped, dropped_alone, new = "ab" * 32, "ab" + "cd" * 31, "ef" * 32, "12" * 32
    runs = []

    def produce(key):
        def compile_():
            runs.append(key)
            output.write_text(key)
            return subprocess.CompletedProcess([], 0, key, "")
        return compile_

    earlier = cache.CompileCache(directory)
    for key in (hit, dropped, dropped_alone):
        earlier.run(key, [output], produce(key))
    (directory / "ab" / ".partial-x1y2").mkdir()  # what an interrupted store leaves
    (directory / "notes.txt").write_text("kept")  # not the cache's: prune leaves it
    (directory / "kept").mkdir()

    current = cache.CompileCache(directory)
    assert current.run(hit, [output], produce("again")).stdout == hit  # a hit, not compiled
    current.run(new, [output], produce(new))
    assert runs == [hit, dropped, dropped_alone, new]
    removed = current.prune()

    assert sorted(p.name for p in removed) == sorted([dropped, dropped_alone, ".partial-x1y2"])
    assert entries(directory) == sorted([new, hit])
    assert not (directory / "ef").exists()  # a key prefix left empty goes too
    assert (directory / "notes.txt").read_text() == "kept" and (directory / "kept").is_dir()
    assert current.run(hit, [output], produce("again")).stdout == hit  # what stays still hits
    assert current.prune() == [] and runs == [hit, dropped, dropped_alone, new]


def test_prune_of_a_cache_that_does_not_exist_removes_nothing(tmp_path):
    assert cache.CompileCache(tmp_path / "none").prune() == []
