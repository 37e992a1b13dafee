"""The extension uses the shared C++ runtime that torch uses, never a copy of
its own: with two libstdc++ in one process a stream formatting a number finds
no num_put facet (on a GPU machine whose compiler linked libstdc++ statically,
the extension crashed at its first formatted message). setup.py names the
shared runtime in the link (SHARED_CXX_RUNTIME, recorded in _build.json)."""

import json
import pathlib
import shutil
import subprocess
import sys
import textwrap

import pytest

import bwdconv

LIBRARY = pathlib.Path(bwdconv._library._C.__file__)
RECORD = json.loads((LIBRARY.parent / "_build.json").read_text())
COMPILER = shutil.which("g++")
RUNTIME_SYMBOL = "_ZNSt6locale7classicEv"  # std::locale::classic(), defined by libstdc++ alone

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("nm") is None,
                                reason="libstdc++ linking is checked on Linux with nm")


def defined_dynamic_symbols(library):
    return subprocess.run(["nm", "-D", "--defined-only", str(library)], capture_output=True,
                          text=True, check=True).stdout


def test_the_extension_defines_none_of_the_cxx_runtime():
    assert RUNTIME_SYMBOL not in defined_dynamic_symbols(LIBRARY)
    needed = subprocess.run(["readelf", "-d", str(LIBRARY)], capture_output=True, text=True,
                            check=True).stdout
    assert "libstdc++.so" in needed


@pytest.mark.skipif(COMPILER is None, reason="needs g++")
def test_the_recorded_link_arguments_defeat_a_statically_linking_driver(tmp_path):
    """A library linked as by a driver that adds -static-libstdc++: alone it
    carries the runtime and loses the formatted number beside torch; with the
    extension's link arguments it carries none and formats it."""
    source = tmp_path / "format.cpp"
    source.write_text(textwrap.dedent("""
        #include <cstring>
        #include <sstream>
        extern "C" int format_number(long value, char* out) {
          std::ostringstream stream;
          stream << "[" << value << "]";
          std::strcpy(out, stream.str().c_str());
          return 0;
        }
    """))

    def link(name, extra):
        library = tmp_path / name
        subprocess.run([COMPILER, "-O2", "-fPIC", "-shared", "-static-libstdc++", str(source),
                        "-o", str(library), *extra], check=True)
        return library

    alone = link("alone.so", [])
    fixed = link("fixed.so", RECORD["link_args"])
    if RUNTIME_SYMBOL not in defined_dynamic_symbols(alone):
        pytest.skip("this g++ ignores -static-libstdc++: nothing to defeat")
    assert RUNTIME_SYMBOL not in defined_dynamic_symbols(fixed)
    code = textwrap.dedent(f"""
        import ctypes, torch
        out = ctypes.create_string_buffer(64)
        ctypes.CDLL({str(fixed)!r}).format_number(12345, out)
        print(out.value.decode())
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[12345]"

