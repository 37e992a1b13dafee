"""What the CMake build wrote for the kernels, and one record per kernel from it.

CMakeLists.txt compiles every csrc/hip/*.cu once per vendor, for all its
architectures, into <build>/kernels/<vendor>/ (bwdconv_device_compile):
- cuda/<name>.o and <name>.ptxas.txt, nvcc's output with -Xptxas -v
  (registers, stack frame, spill bytes, static shared memory per kernel and
  architecture); the SASS of each architecture is read from the object
  (cuobjdump -sass -arch, its listing kept beside the object until the object
  changes);
- hip/<name>-hip-amdgcn-amd-amdhsa-<arch>.s, hipcc's assembly (-save-temps),
  whose AMDGPU metadata gives VGPR/SGPR/AGPR counts, LDS, scratch and spills.
The report compiles nothing: it reads what the last `cmake --build` wrote,
and gathers one record per kernel, named the same on both vendors, with its
figures per target."""
from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from . import KERNEL_DIR
from .amd import amd_code_facts, parse_amd_code, parse_amd_metadata
from .devices import AMD_ARCHS, NV_ARCHS
from .nvidia import nv_code_facts, parse_ptxas, parse_sass

# The kernels that move data (bits copied, no arithmetic): every kernel bwdconv ships.
DATA_MOVEMENT_SOURCES = ("interleave.cu", "relayout.cu", "scatter.cu")


class MissingBuild(Exception):
    """A kernel's output the CMake build should have written is not there."""


def cuda_binary_dirs() -> list[Path]:
    """nvcc's own bin, then the PyPI nvidia-cuda-cuobjdump/-nvdisasm wheels of
    this python or of the project's venv (CUDA 13 toolkits may ship without cuobjdump)."""
    dirs = [Path("/usr/local/cuda/bin")]
    prefixes = {Path(sys.prefix), Path(os.environ.get("BWDCONV_VENV", Path.home() / ".cache/bwdconv/venv"))}
    for prefix in prefixes:
        for site in glob.glob(str(prefix / "lib" / "python3*" / "site-packages")):
            dirs += [Path(p) for p in sorted(glob.glob(site + "/nvidia/cu1*/bin"), reverse=True)]
    return dirs


def cmake_cache_value(build: Path, name: str) -> str | None:
    """A variable of the build's CMakeCache.txt (NAME:TYPE=value), None where unset."""
    cache = build / "CMakeCache.txt"
    if not cache.is_file():
        return None
    m = re.search(rf"^{re.escape(name)}:[A-Z]+=(.*)$", cache.read_text(), re.MULTILINE)
    return m.group(1) if m and m.group(1) and not m.group(1).endswith("-NOTFOUND") else None


def compiler_built_with(build: Path, option: str, variable: str) -> str | None:
    """The compiler (`variable`) of a vendor the build compiles the kernels for (`option` ON)."""
    on = (cmake_cache_value(build, option) or "").upper() in ("ON", "TRUE", "YES", "1")
    return cmake_cache_value(build, variable) if on else None


@dataclass
class Tools:
    """The compilers the build used (from its CMake cache), and the tools the report runs."""
    nvcc: str | None
    cuobjdump: str | None
    hipcc: str | None
    cxxfilt: str | None

    @staticmethod
    def discover(build: Path) -> "Tools":
        return Tools(compiler_built_with(build, "BWDCONV_CUDA", "NVCC_EXECUTABLE"),
                     shutil.which("cuobjdump")
                     or shutil.which("cuobjdump", path=os.pathsep.join(map(str, cuda_binary_dirs()))),
                     compiler_built_with(build, "BWDCONV_HIP", "HIPCC_EXECUTABLE"),
                     shutil.which("c++filt"))

    def cuobjdump_env(self) -> dict:
        env = dict(os.environ)
        if self.cuobjdump:  # cuobjdump -sass runs the nvdisasm next to it
            env["PATH"] = str(Path(self.cuobjdump).parent) + os.pathsep + env.get("PATH", "")
        return env


def run(cmd: list[str], env: dict | None = None) -> subprocess.CompletedProcess:
    result = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{result.stderr[-4000:]}")
    return result


def demangle(names: list[str], cxxfilt: str | None) -> dict[str, str]:
    if not names or not cxxfilt:
        return {n: n for n in names}
    out = subprocess.run([cxxfilt], input="\n".join(names), capture_output=True, text=True).stdout
    return dict(zip(names, out.splitlines()))


def short_name(demangled: str) -> str:
    """void bwdconv::hip::(anonymous namespace)::interleave_kernel<unsigned short, int>(...) ->
    interleave_kernel<unsigned short, int>: the same on both vendors."""
    name = demangled[5:] if demangled.startswith("void ") else demangled
    depth, end = 0, len(name)
    for i, ch in enumerate(name):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0 and not name.startswith("(anonymous", i):
            end = i
            break
    return name[:end].replace("bwdconv::hip::", "").replace("(anonymous namespace)::", "")


def cuda_outputs(build: Path, name: str) -> tuple[Path, Path]:
    """The object of kernel source `name` and its ptxas lines."""
    directory = build / "kernels" / "cuda"
    return directory / f"{name}.o", directory / f"{name}.ptxas.txt"


def hip_assembly(build: Path, name: str, arch: str) -> Path:
    return build / "kernels" / "hip" / f"{name}-hip-amdgcn-amd-amdhsa-{arch}.s"


def built(path: Path) -> Path:
    if not path.is_file():
        raise MissingBuild(f"{path} is missing: build the kernels first (cmake -DBWDCONV_CUDA=ON "
                           "-DBWDCONV_HIP=ON, then cmake --build; scripts/test.sh does both)")
    return path


def sass_listing(tools: Tools, obj: Path, arch: str) -> str:
    """cuobjdump -sass's listing of `arch`'s code in the object, kept beside it
    (<name>.<arch>.sass) and made again only when the object is newer."""
    listing = obj.with_name(f"{obj.stem}.{arch}.sass")
    if not listing.is_file() or listing.stat().st_mtime < obj.stat().st_mtime:
        text = run([tools.cuobjdump, "-sass", "-arch", arch, str(obj)], env=tools.cuobjdump_env()).stdout
        listing.write_text(text)
    return listing.read_text()


def read_nvidia(tools: Tools, build: Path, name: str) -> dict[str, dict]:
    """{sm_XX: {"table": resources per symbol, "code": SASS opcodes per symbol}}."""
    obj, log = cuda_outputs(build, name)
    resources = parse_ptxas(built(log).read_text())
    found = {}
    for arch in NV_ARCHS:
        if arch not in resources:
            raise MissingBuild(f"{log} has no kernel for {arch}: BWDCONV_CUDA_ARCHITECTURES "
                               f"must include {arch[3:]}")
        sass = parse_sass(sass_listing(tools, built(obj), arch)) if tools.cuobjdump else {}
        found[arch] = {"table": resources[arch], "code": sass, "facts": nv_code_facts}
    return found


def read_amd(build: Path, name: str) -> dict[str, dict]:
    """{gfxNNN: {"table": metadata per symbol, "code": opcodes per symbol}}."""
    found = {}
    for arch in AMD_ARCHS:
        asm = built(hip_assembly(build, name, arch)).read_text()
        found[arch] = {"table": parse_amd_metadata(asm), "code": parse_amd_code(asm),
                       "facts": amd_code_facts}
    return found


def role_of(source: str) -> str:
    if source in DATA_MOVEMENT_SOURCES:
        return "data_movement"
    return "other"


def collect(tools: Tools, build: Path) -> list[dict]:
    """One record per kernel: its source, name, role and figures per target,
    from each vendor the build compiled for (nvcc, hipcc in its CMake cache)."""
    results = {}
    for source in sorted(KERNEL_DIR.glob("*.cu")):
        targets = {}
        if tools.nvcc:
            targets.update(read_nvidia(tools, build, source.stem))
        if tools.hipcc:
            targets.update(read_amd(build, source.stem))
        results.update({(source.name, arch): r for arch, r in targets.items()})

    names = demangle(sorted({s for r in results.values() for s in r["table"]}), tools.cxxfilt)
    kernels: dict[tuple[str, str], dict] = {}
    for (source, arch), r in sorted(results.items()):
        for symbol, figures in r["table"].items():
            name = short_name(names.get(symbol, symbol))
            k = kernels.setdefault((source, name), {"source": source, "kernel": name,
                                                    "role": role_of(source), "targets": {}})
            entry = {"symbol": symbol, **figures}
            if symbol in r["code"]:
                entry.update(r["facts"](r["code"][symbol]))
            k["targets"][arch] = entry
    return list(kernels.values())


def tools_line(tools: Tools) -> str:
    def version(tool, pattern):
        """What `tool --version` prints that matches `pattern`."""
        try:
            text = subprocess.run([tool, "--version"], capture_output=True, text=True).stdout
        except OSError:
            return "missing"
        m = re.search(pattern, text)
        return m.group(0) if m else "?"
    parts = []
    if tools.nvcc:
        parts.append("nvcc " + version(tools.nvcc, r"V\d+\.\d+\.\d+"))
    if tools.cuobjdump:
        parts.append("cuobjdump " + version(tools.cuobjdump, r"V\d+\.\d+\.\d+"))
    if tools.hipcc:
        parts.append("hipcc: " + version(tools.hipcc, r".*clang version.*"))
    return "; ".join(parts) or "none"
