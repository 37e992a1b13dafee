"""Builds bwdconv._C from csrc/ops, csrc/dispatch and csrc/hip.

The csrc/hip kernels are always compiled for the host target (plain C++, run on
the CPU grid executor for CPU tensors when asked; host_target_sources).
- CPU-only machine, CPU or CUDA torch, no nvcc: no device kernels (their
  host-target compilation defines the device launchers, which report that to a
  GPU tensor that needs one: BWDCONV_TARGET_FUNCTION, csrc/hip/portability.h).
- CUDA torch and nvcc: also the csrc/hip kernels for CUDA; TORCH_CUDA_ARCH_LIST
  is respected and defaults to sm_80 and sm_90.
- ROCm torch: the same kernel sources through torch's hipify and hipcc;
  PYTORCH_ROCM_ARCH is respected and defaults to gfx90a and gfx940.
BWDCONV_FORCE_CPU=1 skips the kernels; BWDCONV_DEBUG=1 builds without optimisation.
Objects are kept between builds, one directory per set of targets
(build/extension/ without device code, build/extension-cuda-8.0_9.0/ and so on:
objects_directory), so that pip install -e .
(whose editable and wheel builds otherwise compile in a new temporary
directory each time) recompiles only the sources that changed or include a
header that did (ninja's dependency files).
Beside the extension the build writes _build.json: what it was built with
(toolchain, architectures, flags, torch), which `python -m bwdconv` reports.
A torch older than python/bwdconv/_version.py's TORCH_MINIMUM is refused.
"""

import glob
import json
import os
import re
import runpy
import subprocess
import sys

import torch
from setuptools import find_packages, setup

ROOT = os.path.dirname(os.path.abspath(__file__))
DEBUG = os.environ.get("BWDCONV_DEBUG", "0") == "1"
# The oldest supported torch and why it is that one: python/bwdconv/_version.py,
# run alone (bwdconv is not importable before it is built).
VERSION = runpy.run_path(os.path.join(ROOT, "python", "bwdconv", "_version.py"))
# The csrc/ops objects' precompiled header (tools/precompiled_header.py).
PRECOMPILED = runpy.run_path(os.path.join(ROOT, "tools", "precompiled_header.py"))
TOO_OLD = VERSION["too_old_message"](torch.__version__)
if TOO_OLD is not None:
    raise SystemExit(f"error: {TOO_OLD}")

# After the check: importing it prints torch's notes on CUDA and ROCm.
from torch.utils import cpp_extension  # noqa: E402


def sources(pattern):
    return sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, pattern)))


def write_if_changed(path, text):
    """Writes `text` to `path` unless it holds it already (an unchanged file
    keeps its time, so ninja finds its object up to date)."""
    try:
        with open(path) as f:
            if f.read() == text:
                return
    except FileNotFoundError:
        pass
    with open(path, "w") as f:
        f.write(text)


def host_target_sources(directory):
    """One translation unit per csrc/hip/*.cu that compiles it for the host
    target, written into `directory` from csrc/hip/host_target.cpp.in (as
    CMakeLists.txt writes its own); their paths."""
    with open(os.path.join(ROOT, "csrc", "hip", "host_target.cpp.in")) as f:
        template = f.read()
    os.makedirs(directory, exist_ok=True)
    written = []
    for kernel in sources("csrc/hip/*.cu"):
        name = os.path.splitext(os.path.basename(kernel))[0]
        path = os.path.join(directory, name + ".cpp")
        write_if_changed(path, template.replace("@KERNEL@", name))
        written.append(path)
    return written


def gpu_toolchain():
    """'cuda', 'hip' or None: which kernel build this torch and machine allow."""
    if os.environ.get("BWDCONV_FORCE_CPU", "0") == "1":
        return None
    if torch.version.hip is not None and cpp_extension.ROCM_HOME is not None:
        return "hip"
    if torch.version.cuda is not None and cpp_extension.CUDA_HOME is not None:
        return "cuda"
    return None


def kernel_architectures(toolchain):
    """The GPU architectures the kernels are compiled for (the environment
    variable torch's build reads, with bwdconv's default)."""
    if toolchain == "cuda":
        return os.environ.setdefault("TORCH_CUDA_ARCH_LIST", DEFAULT_ARCHITECTURES["cuda"])
    if toolchain == "hip":
        return os.environ.setdefault("PYTORCH_ROCM_ARCH", DEFAULT_ARCHITECTURES["hip"])
    return ""


def describe_targets(toolchain):
    """One line: the device code this build compiles."""
    if toolchain is None:
        why = "BWDCONV_FORCE_CPU=1" if os.environ.get("BWDCONV_FORCE_CPU", "0") == "1" \
            else "no GPU toolchain"
        return f"none ({why}): the C++ ops with the host-target kernels"
    return f"{toolchain} kernels for {kernel_architectures(toolchain)} and the host target"


# The C++ runtime from the shared library torch uses, also where the compiler
# driver links libstdc++ statically by default: named before the driver's own
# libraries, the shared library resolves every C++ runtime symbol and the
# static archive contributes nothing. With two copies in one process a stream
# formatting a number finds no num_put facet: the extension crashed at its
# first formatted message (benchmarks/results/gpu-2026-11-27-h200).
SHARED_CXX_RUNTIME = ["-Wl,-Bdynamic", "-lstdc++"] if sys.platform.startswith("linux") else []


def extension(toolchain):
    # The C++ standard is torch's choice (newer releases need C++20).
    # Without BWDCONV_DEBUG no debug information (-g0 overrides the -g in
    # Python's own CFLAGS): it took about 40% of each torch-including
    # object's compile time (11.8 s against 6.8 s for csrc/ops/filter.cpp).
    cxx_flags = ["-O0", "-g"] if DEBUG else ["-O3", "-DNDEBUG", "-g0"]
    include_dirs = [os.path.join(ROOT, "csrc")]
    files = (sources("csrc/ops/*.cpp") + sources("csrc/dispatch/*.cpp") + sources("csrc/hip/*.cpp")
             + [os.path.relpath(p, ROOT) for p in host_target_sources(HOST_TARGET_DIR)])
    if toolchain is None:
        return cpp_extension.CppExtension(
            "bwdconv._C",
            files,
            include_dirs=include_dirs,
            extra_compile_args={"cxx": cxx_flags},
            extra_link_args=SHARED_CXX_RUNTIME,
        )
    files += sources("csrc/hip/*.cu")
    defines = ["-DBWDCONV_WITH_GPU_KERNELS"]
    kernel_architectures(toolchain)
    device_flags = ["-O3", "--expt-relaxed-constexpr"] if toolchain == "cuda" else ["-O3"]
    return cpp_extension.CUDAExtension(
        "bwdconv._C",
        files,
        include_dirs=include_dirs,
        extra_compile_args={"cxx": cxx_flags + defines, "nvcc": device_flags + defines},
        extra_link_args=SHARED_CXX_RUNTIME,
    )


def build_record(toolchain, ext):
    """What the extension is built with, as `python -m bwdconv` reports it."""
    import torch

    return {
        "toolchain": toolchain or "cpu",
        "architectures": [a for a in re.split(r"[;,\s]+", kernel_architectures(toolchain)) if a],
        "debug": DEBUG,
        "force_cpu": os.environ.get("BWDCONV_FORCE_CPU", "0") == "1",
        "compile_args": ext.extra_compile_args,
        "link_args": ext.extra_link_args,
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "torch_hip": torch.version.hip,
    }


PERSISTENT_BUILD_DIR = os.path.join(ROOT, "build", "extension")
# The host-target translation units (host_target_sources): the same text for
# every configuration, each compiled in its own objects directory.
HOST_TARGET_DIR = os.path.join(ROOT, "build", "host_target")
DEFAULT_ARCHITECTURES = {"cuda": "8.0;9.0", "hip": "gfx90a;gfx940"}


def configuration_name(toolchain, architectures, debug):
    """The build's targets as a directory name: 'cpu', 'cuda-8.0_9.0',
    'hip-gfx90a_gfx940', with '-debug' for BWDCONV_DEBUG=1."""
    name = "cpu" if toolchain is None else "-".join(
        [toolchain, "_".join(a for a in re.split(r"[;,\s]+", architectures) if a)])
    name = re.sub(r"[^A-Za-z0-9._+-]", "_", name)
    return name + ("-debug" if debug else "")


def objects_directory(toolchain, architectures, debug):
    """Where a configuration's objects stay between builds: build/extension/
    for the build without device code (BWDCONV_FORCE_CPU=1, no GPU toolchain,
    the main job on a machine without a GPU), build/extension-<toolchain>-
    <architectures>/ for one with it (build/extension-cuda-8.0_9.0/ for
    every CUDA target, what pip install and test.sh build where nvcc is
    found; build/extension-cuda-9.0/ for the main job on an H100/H200), and
    -debug after either for BWDCONV_DEBUG=1. Objects compiled for one set of
    targets are never linked into another's extension, and switching back
    finds a configuration's objects up to date."""
    if toolchain is None:
        return PERSISTENT_BUILD_DIR + ("-debug" if debug else "")
    return f"{PERSISTENT_BUILD_DIR}-{configuration_name(toolchain, architectures, debug)}"


class BuildExtensionWithRecord(cpp_extension.BuildExtension):
    """torch's build_ext compiling in build/extension/ (unless told another
    directory), then _build.json written beside the built extension."""

    told = False  # the build's lines below printed

    def finalize_options(self):
        if self.build_temp is None:
            self.build_temp = objects_directory(TOOLCHAIN, kernel_architectures(TOOLCHAIN), DEBUG)
        # Progress: setup.sh shows these lines and ninja's "[n/m]" ones (once:
        # an editable install finalizes build_ext more than once).
        if not BuildExtensionWithRecord.told:
            BuildExtensionWithRecord.told = True
            print(f"bwdconv: device code: {describe_targets(TOOLCHAIN)}", flush=True)
            print(f"bwdconv: objects in {os.path.relpath(self.build_temp, ROOT)}", flush=True)
        # setuptools' own up-to-date check compares the sources, not the headers,
        # with the built extension: always let ninja decide what to recompile.
        self.force = True
        super().finalize_options()

    def run(self):
        with PRECOMPILED["precompiling"](cpp_extension, ROOT, torch):
            super().run()
        built = self.get_ext_fullpath("bwdconv._C")
        refuse_a_private_cxx_runtime(built)
        with open(os.path.join(os.path.dirname(built), "_build.json"), "w") as f:
            json.dump(build_record(TOOLCHAIN, self.extensions[0]), f, indent=1, sort_keys=True)
            f.write("\n")


def refuse_a_private_cxx_runtime(library):
    """Fails the build when the extension still defines the C++ runtime's own
    std::locale (a copy of libstdc++ linked in despite SHARED_CXX_RUNTIME):
    loaded beside torch's it would crash, so the build says why instead."""
    try:
        symbols = subprocess.run(["nm", "-D", "--defined-only", library], capture_output=True,
                                 text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return  # no nm: nothing to check with
    if "_ZNSt6locale7classicEv" in symbols:
        raise SystemExit(
            f"error: {library} holds its own copy of libstdc++ (the compiler "
            f"{os.environ.get('CXX', 'c++')} links it statically); beside torch's shared "
            "libstdc++ it would crash. Build with the system compiler, e.g. CXX=g++.")


TOOLCHAIN = gpu_toolchain()

if __name__ == "__main__":  # pip and setuptools run it so; tests load its functions alone
    setup(
        name="bwdconv",
        version="0.1.0",
        description="Planned, faster convolution backward for PyTorch",
        package_dir={"": "python"},
        packages=find_packages("python"),
        package_data={"bwdconv.bench": ["suites/*.txt"]},
        ext_modules=[extension(TOOLCHAIN)],
        cmdclass={"build_ext": BuildExtensionWithRecord},
        entry_points={
            "console_scripts": [
                "bwdconv-bench=bwdconv.bench:main",
                "bwdconv-tune=bwdconv.tune:main",
                "bwdconv-doctor=bwdconv.doctor:main",
                "bwdconv-demo=bwdconv.demo:main",
            ]
        },
        python_requires=">=3.10",
        install_requires=[f"torch>={VERSION['TORCH_MINIMUM']}", "tqdm"],
    )
