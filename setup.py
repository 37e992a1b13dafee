"""Builds bwdconv._C from csrc/ops, csrc/dispatch and csrc/hip.

The csrc/hip kernels are always compiled for the host target (csrc/hip/host/:
plain C++, run on the CPU grid executor for CPU tensors when asked).
- CPU-only machine, CPU or CUDA torch, no nvcc: no device kernels
  (csrc/hip/without_device/ reports that to a GPU tensor that needs one).
- CUDA torch and nvcc: also the csrc/hip kernels for CUDA; TORCH_CUDA_ARCH_LIST
  is respected and defaults to sm_80 and sm_90.
- ROCm torch: the same kernel sources through torch's hipify and hipcc;
  PYTORCH_ROCM_ARCH is respected and defaults to gfx90a and gfx940.
BWDCONV_FORCE_CPU=1 skips the kernels; BWDCONV_DEBUG=1 builds without optimisation.
A torch older than python/bwdconv/_version.py's TORCH_MINIMUM is refused.
"""

import glob
import os
import runpy

import torch
from setuptools import find_packages, setup

ROOT = os.path.dirname(os.path.abspath(__file__))
DEBUG = os.environ.get("BWDCONV_DEBUG", "0") == "1"
# The oldest supported torch and why it is that one: python/bwdconv/_version.py,
# run alone (bwdconv is not importable before it is built).
VERSION = runpy.run_path(os.path.join(ROOT, "python", "bwdconv", "_version.py"))
TOO_OLD = VERSION["too_old_message"](torch.__version__)
if TOO_OLD is not None:
    raise SystemExit(f"error: {TOO_OLD}")

# After the check: importing it prints torch's notes on CUDA and ROCm.
from torch.utils import cpp_extension  # noqa: E402


def sources(pattern):
    return sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, pattern)))


def gpu_toolchain():
    """'cuda', 'hip' or None: which kernel build this torch and machine allow."""
    if os.environ.get("BWDCONV_FORCE_CPU", "0") == "1":
        return None
    if torch.version.hip is not None and cpp_extension.ROCM_HOME is not None:
        return "hip"
    if torch.version.cuda is not None and cpp_extension.CUDA_HOME is not None:
        return "cuda"
    return None


def extension():
    toolchain = gpu_toolchain()
    # The C++ standard is torch's choice (newer releases need C++20).
    cxx_flags = ["-O0" if DEBUG else "-O3", "-g" if DEBUG else "-DNDEBUG"]
    include_dirs = [os.path.join(ROOT, "csrc")]
    files = (sources("csrc/ops/*.cpp") + sources("csrc/dispatch/*.cpp") + sources("csrc/hip/*.cpp")
             + sources("csrc/hip/host/*.cpp"))
    if toolchain is None:
        return cpp_extension.CppExtension(
            "bwdconv._C",
            files + sources("csrc/hip/without_device/*.cpp"),
            include_dirs=include_dirs,
            extra_compile_args={"cxx": cxx_flags},
        )
    files += sources("csrc/hip/*.cu")
    defines = ["-DBWDCONV_WITH_GPU_KERNELS"]
    if toolchain == "cuda":
        os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "8.0;9.0")
        device_flags = ["-O3", "--expt-relaxed-constexpr"]
    else:
        os.environ.setdefault("PYTORCH_ROCM_ARCH", "gfx90a;gfx940")
        device_flags = ["-O3"]
    return cpp_extension.CUDAExtension(
        "bwdconv._C",
        files,
        include_dirs=include_dirs,
        extra_compile_args={"cxx": cxx_flags + defines, "nvcc": device_flags + defines},
    )


setup(
    name="bwdconv",
    version="0.1.0",
    description="Planned, faster convolution backward for PyTorch",
    package_dir={"": "python"},
    packages=find_packages("python"),
    ext_modules=[extension()],
    cmdclass={"build_ext": cpp_extension.BuildExtension},
    entry_points={
        "console_scripts": ["bwdconv-bench=bwdconv.bench:main", "bwdconv-demo=bwdconv.demo:main"]
    },
    python_requires=">=3.10",
    install_requires=[f"torch>={VERSION['TORCH_MINIMUM']}"],
)
