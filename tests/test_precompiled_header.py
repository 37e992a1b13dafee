"""tools/precompiled_header.py: the csrc/ops objects' precompiled header is
compiled with the objects' own flags, reused while nothing it depends on
changes, and its rebuild makes ninja recompile the objects that read it."""

import os
import shutil
import types

import pytest

import precompiled_header as pch

COMPILER = shutil.which("g++")
pytestmark = pytest.mark.skipif(COMPILER is None or not pch.is_gcc(COMPILER),
                                reason="the precompiled header is built with GCC only")


def source_tree(root, text):
    header = root / "csrc" / pch.HEADER
    header.parent.mkdir(parents=True, exist_ok=True)
    header.write_text(text)
    return header


def fake_torch(version):
    return types.SimpleNamespace(__version__=version, __file__="/torch/__init__.py",
                                 version=types.SimpleNamespace(git_version="abc"))


def test_the_header_is_compiled_with_the_objects_flags_and_reused(tmp_path):
    source_tree(tmp_path, "#include <vector>\n")
    build = tmp_path / "build"
    ops_object = build / "csrc" / "ops" / "phase.o"
    kernel_object = build / "csrc" / "hip" / "layout.o"
    for built in (ops_object, kernel_object):
        built.parent.mkdir(parents=True)
        built.write_text("")
    objects = [str(ops_object), str(kernel_object)]
    compile_once = lambda torch_module, flags=("-O2",): pch.compile_header(  # noqa: E731
        COMPILER, ["-fPIC"], list(flags), str(tmp_path), str(build), objects, torch_module)

    flag = compile_once(fake_torch("2.11.0"))
    gch = build / "precompiled" / (pch.HEADER + ".gch")
    assert flag == f"-I{build / 'precompiled'}" and gch.stat().st_size > 0
    # the header's first build removes the csrc/ops objects only
    assert not ops_object.exists() and kernel_object.exists()

    ops_object.write_text("")
    built_at = gch.stat().st_mtime_ns
    assert compile_once(fake_torch("2.11.0")) == flag
    assert gch.stat().st_mtime_ns == built_at and ops_object.exists()  # reused

    compile_once(fake_torch("2.12.0"))  # another torch: another header
    assert gch.stat().st_mtime_ns != built_at and not ops_object.exists()
    ops_object.write_text("")
    built_at = gch.stat().st_mtime_ns
    compile_once(fake_torch("2.12.0"), flags=("-O3",))  # other flags: another header
    assert gch.stat().st_mtime_ns != built_at and not ops_object.exists()


def test_the_command_is_torchs_rule_with_the_header_for_input():
    command = pch.header_command("g++", ["-I/a", "'-DX=a b'"], ["-O3", "-std=c++17"], "h.h",
                                 "h.h.gch")
    assert command == ["g++", "-I/a", "-DX=a b", "-x", "c++-header", "h.h", "-o", "h.h.gch",
                       "-O3", "-std=c++17"]


def test_another_compiler_builds_without_it(tmp_path, monkeypatch):
    monkeypatch.setattr(pch, "is_gcc", lambda compiler: False)
    source_tree(tmp_path, "#include <vector>\n")
    assert pch.compile_header("clang++", [], [], str(tmp_path), str(tmp_path / "b"), [],
                              fake_torch("2.11.0")) is None
    assert not os.path.exists(tmp_path / "b")


def test_the_ninja_build_gets_the_header_first_on_its_include_path(tmp_path):
    source_tree(tmp_path, "#include <vector>\n")
    seen = {}

    def write_and_compile(**kwargs):
        seen.update(kwargs)

    extension = types.SimpleNamespace(_write_ninja_file_and_compile_objects=write_and_compile,
                                      get_cxx_compiler=lambda: COMPILER)
    build = tmp_path / "build"
    with pch.precompiling(extension, str(tmp_path), fake_torch("2.11.0")):
        extension._write_ninja_file_and_compile_objects(
            cflags=["-I/csrc"], post_cflags=["-O2"], build_directory=str(build), objects=[])
    assert seen["cflags"] == [f"-I{build / 'precompiled'}", "-I/csrc"]
    assert extension._write_ninja_file_and_compile_objects is write_and_compile  # restored


def test_a_failed_header_leaves_the_build_as_it_was(tmp_path, capsys):
    source_tree(tmp_path, "#error no\n")
    seen = {}
    extension = types.SimpleNamespace(
        _write_ninja_file_and_compile_objects=lambda **kwargs: seen.update(kwargs),
        get_cxx_compiler=lambda: COMPILER)
    with pch.precompiling(extension, str(tmp_path), fake_torch("2.11.0")):
        extension._write_ninja_file_and_compile_objects(
            cflags=["-I/csrc"], post_cflags=[], build_directory=str(tmp_path / "b"), objects=[])
    assert seen["cflags"] == ["-I/csrc"]
    assert "no precompiled header" in capsys.readouterr().out
