"""The csrc/ops objects' precompiled header, for setup.py.

Each csrc/ops source includes ops/precompiled.h first (ATen's headers): about
5 of its 6.5 s of compile time without it. With GCC, setup.py compiles that
header once per build, with the objects' own compiler and flags, to
<objects>/precompiled/ops/precompiled.h.gch, and puts <objects>/precompiled
first on the include path: GCC then reads the .gch in place of the header
(docs/environment.md, "Build time").

torch's build_ext knows the objects' final flags only where it writes the
ninja file, cpp_extension._write_ninja_file_and_compile_objects, so
`precompiling` wraps that function for one build. Whatever goes wrong there
(another compiler, a torch whose function takes other arguments, a compile
error) leaves the build as it would be without the header; a .gch that GCC
finds unusable it ignores, and parses the header.
"""

import contextlib
import hashlib
import os
import shlex
import subprocess

HEADER = os.path.join("ops", "precompiled.h")
OPS_OBJECTS = os.sep + os.path.join("csrc", "ops") + os.sep  # the objects that read it


def is_gcc(compiler):
    """True for GCC (clang reads a .gch only through -include)."""
    macros = subprocess.run([compiler, "-dM", "-E", "-x", "c++", os.devnull],
                            capture_output=True, text=True, check=True).stdout
    return "__GNUC__" in macros and "__clang__" not in macros


def header_command(compiler, cflags, post_cflags, header, target):
    """The objects' compile command (torch's ninja rule: cxx cflags -c in -o
    out post_cflags) with the header as a C++ header for input."""
    return [compiler, *shlex.split(" ".join(cflags)), "-x", "c++-header", header, "-o", target,
            *shlex.split(" ".join(post_cflags))]


def fingerprint(command, header, torch_module):
    """What the .gch depends on beyond ninja's view: the command, the header,
    and the torch whose headers it holds."""
    with open(header, "rb") as f:
        text = f.read()
    parts = [" ".join(command), text.decode(), torch_module.__version__, torch_module.__file__,
             str(getattr(torch_module.version, "git_version", ""))]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def compile_header(compiler, cflags, post_cflags, source_root, build_directory, objects,
                   torch_module):
    """The include flag that puts the compiled header first, or None where
    the compiler is not GCC. Compiles only when its fingerprint changed, and
    then removes the csrc/ops `objects` built before: ninja's dependency files do not
    name the .gch or the headers inside it, so only that makes ninja rebuild
    what an older header (another torch) compiled."""
    if not is_gcc(compiler):
        return None
    directory = os.path.join(build_directory, "precompiled")
    header = os.path.join(source_root, "csrc", HEADER)
    target = os.path.join(directory, HEADER + ".gch")
    command = header_command(compiler, cflags, post_cflags, header, target)
    stamp = target + ".fingerprint"
    wanted = fingerprint(command, header, torch_module)
    if os.path.exists(target) and os.path.exists(stamp):
        with open(stamp) as f:
            if f.read() == wanted:
                return "-I" + directory
    os.makedirs(os.path.dirname(target), exist_ok=True)
    print(f"bwdconv: precompiling csrc/{HEADER} (ATen's headers, once for every csrc/ops object)",
          flush=True)
    subprocess.run(command, check=True)
    for built in objects:
        if OPS_OBJECTS in built and os.path.exists(built):
            os.remove(built)
    with open(stamp, "w") as f:
        f.write(wanted)
    return "-I" + directory


@contextlib.contextmanager
def precompiling(cpp_extension, source_root, torch_module):
    """While it lasts, torch's ninja build compiles the header first and
    puts it on the objects' include path."""
    original = getattr(cpp_extension, "_write_ninja_file_and_compile_objects", None)
    if original is None:
        yield
        return

    def write_and_compile(*args, **kwargs):
        flag = None
        try:
            compiler = cpp_extension.get_cxx_compiler() \
                if hasattr(cpp_extension, "get_cxx_compiler") else os.environ.get("CXX", "c++")
            flag = compile_header(compiler, kwargs["cflags"], kwargs["post_cflags"],
                                  source_root, kwargs["build_directory"], kwargs["objects"],
                                  torch_module)
        except (KeyError, OSError, subprocess.CalledProcessError) as error:
            print(f"bwdconv: no precompiled header ({error!r}); each object parses ATen's "
                  "headers", flush=True)
        if flag is not None:
            kwargs["cflags"] = [shlex.quote(flag), *kwargs["cflags"]]
        return original(*args, **kwargs)

    cpp_extension._write_ninja_file_and_compile_objects = write_and_compile
    try:
        yield
    finally:
        cpp_extension._write_ninja_file_and_compile_objects = original
