"""Each csrc/hip kernel source is compiled twice into one extension: for the
device (nvcc, hipcc) and for the host target (the translation units setup.py's
host_target_sources writes from csrc/hip/host_target.cpp.in). A host-side
function with external linkage that both objects define is one symbol after
linking, and the linker keeps whichever copy it meets first. Where that
function's body depends on the target (it launches a kernel, or reads memory
through the host grid's recorder), a GPU launch can end up running the host
grid on device pointers. portability.h keeps such code in the target's own
namespace (BWDCONV_TARGET_NAMESPACE).

The check compiles each host-target source without inlining and with a
section per function, so every function used is its own definition with its
own relocations, and follows the calls: no externally visible function
outside the target's namespace may reach host-target code. It needs a C++
compiler and readelf, not a GPU or torch's build."""

import pathlib
import re
import runpy
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
KERNEL_SOURCES = sorted((ROOT / "csrc" / "hip").glob("*.cu"))
COMPILER = shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")

# Mangled prefixes of code that exists only in a host-target compilation: the
# target's namespace and the host grid (host_grid.h).
HOST_ONLY = ("_ZN7bwdconv3hip11host_target", "_ZN7bwdconv3hip4host")


def compile_unoptimised(source, out):
    subprocess.run([COMPILER, "-std=c++20", "-O0", "-fno-inline", "-ffunction-sections", "-c",
                    f"-I{ROOT / 'csrc'}", str(source), "-o", str(out)], check=True)


def external_functions(obj):
    """Mangled names of the functions `obj` defines with external (or weak) linkage."""
    text = subprocess.run(["nm", "--defined-only", str(obj)], capture_output=True, text=True,
                          check=True).stdout
    rows = (line.split() for line in text.splitlines())
    return {row[2] for row in rows if len(row) == 3 and row[1] in ("T", "W")}


def calls(obj):
    """{function: the symbols its section refers to}, from its relocations."""
    text = subprocess.run(["readelf", "-rW", str(obj)], capture_output=True, text=True,
                          check=True).stdout
    graph, current = {}, None
    for line in text.splitlines():
        section = re.match(r"Relocation section '\.rela\.text\.(\S+)'", line)
        if section:
            current = graph.setdefault(section.group(1), set())
            continue
        if line.startswith("Relocation section"):
            current = None
            continue
        fields = line.split()
        if current is not None and len(fields) >= 5 and fields[0][:1].isdigit():
            current.add(fields[4])
    return graph


def target_dependent(graph):
    """The functions that reach host-only code through their calls."""
    reaching = {name for name in graph if name.startswith(HOST_ONLY)}
    changed = True
    while changed:
        changed = False
        for name, callees in graph.items():
            if name not in reaching and any(c.startswith(HOST_ONLY) or c in reaching
                                            for c in callees):
                reaching.add(name)
                changed = True
    return reaching


def in_targets_namespace(mangled):
    """Host-only code, or a specialisation on Target::host (a launcher's
    explicit instantiation, one symbol per target by its template argument)."""
    return mangled.startswith(HOST_ONLY) or "6TargetE1E" in mangled


def host_target_source(kernel, directory):
    """The host-target translation unit of `kernel` the extension's build compiles."""
    setup = runpy.run_path(str(ROOT / "setup.py"), run_name="bwdconv_setup_functions")
    written = setup["host_target_sources"](str(directory))
    return next(pathlib.Path(p) for p in written if pathlib.Path(p).stem == kernel.stem)


@pytest.mark.skipif(COMPILER is None or shutil.which("readelf") is None,
                    reason="needs a C++ compiler and readelf")
@pytest.mark.parametrize("kernel", KERNEL_SOURCES, ids=lambda p: p.name)
def test_no_shared_host_side_function_depends_on_the_target(kernel, tmp_path):
    obj = tmp_path / "kernel.o"
    compile_unoptimised(host_target_source(kernel, tmp_path), obj)
    exposed = external_functions(obj)
    dependent = target_dependent(calls(obj))
    leaking = sorted(name for name in dependent & exposed if not in_targets_namespace(name))
    demangled = subprocess.run(["c++filt"], input="\n".join(leaking), capture_output=True,
                               text=True).stdout.splitlines() if leaking else []
    assert not leaking, ("host-side functions outside BWDCONV_TARGET_NAMESPACE whose code "
                         "depends on the target:\n" + "\n".join(demangled))
