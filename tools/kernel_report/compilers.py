"""The compilers: finding nvcc, cuobjdump, hipcc and c++filt and their versions;
compiling every csrc/hip/*.cu for sm_80 and sm_90 (nvcc -cubin -Xptxas -v:
registers, stack frame, spill bytes, static shared memory; cuobjdump -sass: the
instructions) and for gfx90a and gfx940 (hipcc --cuda-device-only -S: the
AMDGPU metadata gives VGPR/SGPR/AGPR counts, LDS, scratch and spills), each
step through the compile cache where --cache names one (cache.py); and
gathering one record per kernel, named the same on both vendors, with its
figures per target."""
from __future__ import annotations

import concurrent.futures
import functools
import glob
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from . import KERNEL_DIR, ROOT
from .amd import amd_code_facts, parse_amd_code, parse_amd_metadata
from .cache import CompileCache, compile_key, key_command, keyed_environment, source_inputs
from .devices import AMD_ARCHS, NV_ARCHS
from .nvidia import nv_code_facts, parse_ptxas, parse_sass

# The same device flags setup.py passes (-O3).
NVCC_FLAGS = ["-O3", "-std=c++17", "--expt-relaxed-constexpr"]
HIPCC_FLAGS = ["-O3", "-std=c++17", "-x", "hip"]

# Kernels by role: what moves data (bits copied, no arithmetic) and what computes
# splitk.
DATA_MOVEMENT_SOURCES = ("interleave.cu", "relayout.cu", "scatter.cu")
SPLITK_SOURCES = ("splitk.cu",)


def find_tool(name: str, extra_dirs: list[Path]) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    for d in extra_dirs:
        candidate = d / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def cuda_binary_dirs() -> list[Path]:
    """nvcc's own bin, then the PyPI nvidia-cuda-cuobjdump/-nvdisasm wheels of
    this python or of the project's venv (CUDA 13 toolkits may ship without cuobjdump)."""
    dirs = [Path("/usr/local/cuda/bin")]
    prefixes = {Path(sys.prefix), Path(os.environ.get("BWDCONV_VENV", Path.home() / ".cache/bwdconv/venv"))}
    for prefix in prefixes:
        for site in glob.glob(str(prefix / "lib" / "python3*" / "site-packages")):
            dirs += [Path(p) for p in sorted(glob.glob(site + "/nvidia/cu1*/bin"), reverse=True)]
    return dirs


@dataclass
class Tools:
    nvcc: str | None
    cuobjdump: str | None
    hipcc: str | None
    cxxfilt: str | None

    @staticmethod
    def discover() -> "Tools":
        dirs = cuda_binary_dirs()
        cuobjdump = find_tool("cuobjdump", dirs)
        return Tools(find_tool("nvcc", dirs), cuobjdump, find_tool("hipcc", []),
                     find_tool("c++filt", []))

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


@functools.lru_cache(maxsize=None)
def version_text(tool: str) -> str:
    """What `tool --version` prints."""
    try:
        return subprocess.run([tool, "--version"], capture_output=True, text=True).stdout
    except OSError:
        return "missing"


def nvcc_version(tools: Tools) -> str:
    """nvcc's version text and that of the gcc (from PATH) it preprocesses with."""
    return version_text(tools.nvcc) + version_text(shutil.which("gcc") or "gcc")


def run_cached(cache: CompileCache | None, cmd: list[str], compiler_version: str, work: Path,
               outputs: list[Path], inputs: Callable[[], dict[str, bytes]], env: dict | None = None
               ) -> subprocess.CompletedProcess:
    """run(cmd), or without running it, its result and outputs from the cache
    under the key of cmd (its paths in work as placeholders), the compiler's
    version, the environment and inputs()."""
    if cache is None:
        return run(cmd, env)
    key = compile_key(key_command(cmd, work), compiler_version,
                      keyed_environment(os.environ if env is None else env), inputs())
    return cache.run(key, outputs, lambda: run(cmd, env))


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


def disassemble(tools: Tools, cubin: Path, cache: CompileCache | None) -> str:
    """cuobjdump -sass's listing of the cubin, keyed on the cubin's contents."""
    cmd = [tools.cuobjdump, "-sass", str(cubin)]
    return run_cached(cache, cmd, version_text(tools.cuobjdump), cubin.parent, [],
                      lambda: {"cubin": cubin.read_bytes()}, env=tools.cuobjdump_env()).stdout


def compile_nv(tools: Tools, source: Path, arch: str, work: Path,
               cache: CompileCache | None = None) -> dict:
    cubin = work / f"{source.stem}.{arch}.cubin"
    cmd = [tools.nvcc, *NVCC_FLAGS, f"-arch={arch}", "-cubin", "-Xptxas", "-v",
           f"-I{ROOT / 'csrc'}", str(source), "-o", str(cubin)]
    result = run_cached(cache, cmd, nvcc_version(tools), work, [cubin], lambda: source_inputs(source, cmd))
    resources = parse_ptxas(result.stderr + result.stdout)
    sass = {}
    if tools.cuobjdump:
        listing = disassemble(tools, cubin, cache)
        (work / f"{source.stem}.{arch}.sass").write_text(listing)
        sass = parse_sass(listing)
    return {"resources": resources, "sass": sass}


def compile_amd(tools: Tools, source: Path, arch: str, work: Path,
                cache: CompileCache | None = None) -> dict:
    asm_path = work / f"{source.stem}.{arch}.s"
    cmd = [tools.hipcc, *HIPCC_FLAGS, f"--offload-arch={arch}", "--cuda-device-only", "-S",
           f"-I{ROOT / 'csrc'}", str(source), "-o", str(asm_path)]
    run_cached(cache, cmd, version_text(tools.hipcc), work, [asm_path], lambda: source_inputs(source, cmd))
    asm = asm_path.read_text()
    return {"metadata": parse_amd_metadata(asm), "code": parse_amd_code(asm)}


def role_of(source: str) -> str:
    if source in DATA_MOVEMENT_SOURCES:
        return "data_movement"
    if source in SPLITK_SOURCES:
        return "splitk"
    return "other"


def collect(tools: Tools, work: Path, jobs: int, cache: CompileCache | None = None) -> list[dict]:
    sources = sorted(KERNEL_DIR.glob("*.cu"))
    tasks = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        for source in sources:
            if tools.nvcc:
                for arch in NV_ARCHS:
                    tasks[(source.name, arch)] = pool.submit(compile_nv, tools, source, arch, work, cache)
            if tools.hipcc:
                for arch in AMD_ARCHS:
                    tasks[(source.name, arch)] = pool.submit(compile_amd, tools, source, arch, work, cache)
        results = {key: f.result() for key, f in tasks.items()}

    mangled = set()
    for (_, arch), r in results.items():
        mangled.update(r["resources"] if arch.startswith("sm_") else r["metadata"])
    names = demangle(sorted(mangled), tools.cxxfilt)

    kernels: dict[tuple[str, str], dict] = {}
    for (source, arch), r in sorted(results.items()):
        table = r["resources"] if arch.startswith("sm_") else r["metadata"]
        for symbol, res in table.items():
            name = short_name(names.get(symbol, symbol))
            k = kernels.setdefault((source, name), {"source": source, "kernel": name,
                                                    "role": role_of(source), "targets": {}})
            entry = {"symbol": symbol, **res}
            if arch.startswith("sm_"):
                code = r["sass"].get(symbol)
                if code is not None:
                    entry.update(nv_code_facts(code))
            else:
                code = r["code"].get(symbol)
                if code is not None:
                    entry.update(amd_code_facts(code))
            k["targets"][arch] = entry
    return list(kernels.values())


def tools_line(tools: Tools) -> str:
    def version(tool, pattern):
        text = version_text(tool)
        if text == "missing":
            return text
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
