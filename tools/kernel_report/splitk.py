"""splitk: where its chunk products run, read from the sources (on the vendor
GEMM: ATen's batched GEMM in csrc/ops/splitk.cpp's kernel path, no product
kernel in csrc/hip/splitk.cu), and its modelled time on seed 001's line from
the planner's own chunks and steps (scripts/splitk_layout.cpp)."""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from . import KERNEL_DIR, ROOT
from .compilers import run
from .devices import DEVICES
from .seeds import SeedLine, read_seeds, seed_dilation

# The kernel path of csrc/ops/splitk.cpp: pad the input once (where padding is
# non-zero), then per step one strided copy stages every chunk's input window
# as columns and one batched GEMM per offset tap multiplies grad_output by them
# into fp32 partials, then the reduce kernel sums the partials in chunk order.
# Time = (pad + staging + partials) bytes / HBM + max(GEMM flops / (fraction x
# dense 16-bit peak x the share of units one wave of chunk tiles fills),
# grad_output bytes / HBM). Launch overhead is not modelled. Assumed: a step's buffers are
# read back from the last-level cache right after being written (the staged
# columns by the GEMMs, the window by the staging copy) and the later tap
# GEMMs of a step find its grad_output slice and staged columns there too;
# `no_reuse_us` counts every one of those reads from HBM instead.
SPLITK_GEMM_FRACTION_OF_PEAK = 0.5  # assumed for cuBLAS / hipBLASLt on one 64 x 48 tile per chunk


def compile_splitk_layout(work: Path) -> Path | None:
    """scripts/splitk_layout.cpp with the planner (csrc/dispatch), for the planner's own layout."""
    cxx = shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")
    if cxx is None:
        return None
    binary = work / "splitk_layout"
    run([cxx, "-std=c++17", "-O1", f"-I{ROOT / 'csrc'}", str(ROOT / "scripts" / "splitk_layout.cpp"),
         *map(str, sorted((ROOT / "csrc" / "dispatch").glob("*.cpp"))), "-o", str(binary)])
    return binary


def splitk_layout_for(binary: Path, line: SeedLine, units: int, staged_bytes: int) -> dict:
    dil = seed_dilation(line)
    dims = [(line.h, line.y, line.stride[0], line.pad[0], dil[0]),
            (line.w, line.x, line.stride[1], line.pad[1], dil[1])]
    args = [str(binary), "2", str(line.n), str(line.c), str(line.k), str(line.groups), str(units),
            str(staged_bytes), "4"] + [str(v) for dim in dims for v in dim]
    return json.loads(run(args).stdout)


def splitk_step_groups(line: SeedLine, layout: dict) -> list[tuple[int, int]]:
    """(chunks, output rows) of each step group, in the order GemmSplitK::run takes them."""
    oh = line.output()[0]
    b, rows, step = layout["batch_per_chunk"], layout["rows_per_chunk"], layout["step_rows"]
    full, tail = oh // rows, oh - (oh // rows) * rows
    groups = []
    for j in range(b):
        batch_chunks = -(-(line.n - j) // b)
        for offset in range(0, rows, step):
            groups.append((batch_chunks * full, min(step, rows - offset)))
            if offset < tail:
                groups.append((batch_chunks, min(step, tail - offset)))
    return groups


def model_splitk(line: SeedLine, device: dict, layout: dict, element_bytes: int = 2) -> dict:
    (oh, ow), (sh, sw), (dh, dw) = line.output(), line.stride, seed_dilation(line)
    bw, peak = device["hbm_bytes_per_s"], device["dense_16bit_flops"]
    cin, cout, taps = line.c, line.k, line.y * line.x
    x_bytes = line.n * cin * line.h * line.w * element_bytes
    dy_bytes = line.n * cout * oh * ow * element_bytes
    weight = cout * (cin // line.groups) * taps
    # the padded input: every position a window reads
    hp, wp = (oh - 1) * sh + dh * (line.y - 1) + 1, (ow - 1) * sw + dw * (line.x - 1) + 1
    pad = x_bytes + line.n * cin * hp * wp * element_bytes if any(line.pad) else 0
    halo, staged_taps, offset_taps = layout["halo_rows"], layout["staged_taps"], layout["offset_taps"]
    groups = splitk_step_groups(line, layout)
    steps = len(groups)
    window_rows = (lambda r: r + halo) if offset_taps > 1 else (lambda r: (r - 1) * sh + dh * (line.y - 1) + 1)
    window = sum(ch * cin * window_rows(r) * wp for ch, r in groups) * element_bytes
    staged = sum(ch * cin * staged_taps * (r + halo) * ow for ch, r in groups) * element_bytes
    flops = 2 * weight * line.n * oh * ow
    partial_bytes = layout["chunks"] * weight * 4
    partials = 2 * partial_bytes + weight * element_bytes  # GEMM writes, reduce reads, result
    # the share of the device one wave of chunk tiles keeps busy
    tiles = layout["chunks"] * layout["tiles_per_chunk"]
    fill = tiles / (-(-tiles // device["units"]) * device["units"])
    gemm_flops_s = flops / (SPLITK_GEMM_FRACTION_OF_PEAK * peak * fill)
    gemm_s = max(gemm_flops_s, dy_bytes / bw)
    time_s = (pad + window + staged + partials) / bw + gemm_s
    # No reuse: every tap GEMM reads its grad_output slice and staged columns
    # from HBM, and every accumulation reads and writes its partials there.
    steps_per_chunk = layout["batch_per_chunk"] * -(-layout["rows_per_chunk"] // layout["step_rows"])
    no_reuse_bytes = (pad + window + staged + offset_taps * (staged + dy_bytes)
                      + partial_bytes * 2 * steps_per_chunk + weight * element_bytes)
    no_reuse_s = no_reuse_bytes / bw
    roofline_s = max((x_bytes + dy_bytes + weight * element_bytes) / bw, flops / peak)
    working_set = max(ch * cin * staged_taps * (r + halo) * ow * element_bytes
                      + ch * cout * r * ow * element_bytes for ch, r in groups)
    us = lambda seconds: round(seconds * 1e6, 1)
    mb = lambda b: round(b / 1e6, 1)
    return {
        "device": device["name"], "line": line.number, "element_bytes": element_bytes,
        "layout": layout, "step_groups": steps,
        "aten_calls": (1 if pad else 0) + steps * (1 + offset_taps) + 1,
        "bytes_mb": {"input": mb(x_bytes), "grad_output": mb(dy_bytes), "pad": mb(pad),
                     "window_reads": mb(window), "staged_writes": mb(staged),
                     "partials_write_read_and_result": mb(partials)},
        "gemm_gflop": round(flops / 1e9, 2), "gemm_fraction_of_peak": SPLITK_GEMM_FRACTION_OF_PEAK,
        "device_fill": round(fill, 3),
        "reduction_per_gemm": layout["step_rows"] * ow,
        "us": {"pad": us(pad / bw), "staging": us((window + staged) / bw),
               "gemm_flops": us(gemm_flops_s),
               "gemm_grad_output_reads": us(dy_bytes / bw), "gemm": us(gemm_s),
               "partials": us(partials / bw)},
        "partial_bytes": partial_bytes, "staging_cap_bytes": layout["staging_cap_bytes"],
        "step_working_set_mb": mb(working_set),
        "last_level_cache_mb": mb(device["last_level_cache_bytes"]),
        "modelled_us": us(time_s), "roofline_us": us(roofline_s),
        "times_roofline": round(time_s / roofline_s, 2),
        "no_reuse_us": us(no_reuse_s), "no_reuse_times_roofline": round(no_reuse_s / roofline_s, 2),
    }


def splitk_model(work: Path) -> list[dict]:
    lines = [l for l in read_seeds() if l.direction == 4]
    binary = compile_splitk_layout(work)
    if binary is None or not lines:
        return []
    return [model_splitk(line, device, splitk_layout_for(binary, line, device["units"], 2))
            for line in lines for device in DEVICES]


def splitk_products_source() -> dict:
    """Where splitk's chunk products run, read from the sources. The vendor GEMM
    when csrc/ops/splitk.cpp sends GPU tensors to its kernel path (the class
    whose products call ATen's batched GEMM: aten::bmm / baddbmm, and their
    .dtype_out forms for fp16/bf16 operands with fp32 results, which run on
    cuBLAS / hipBLASLt) and csrc/hip/splitk.cu defines no kernel but the reduce."""
    ops = (ROOT / "csrc" / "ops" / "splitk.cpp").read_text()
    cu = (KERNEL_DIR / "splitk.cu").read_text()
    kernels = re.findall(r"__global__\s+void\s+(?:__launch_bounds__\([^)]*\)\s*)?(\w+)", cu)
    calls = sorted(set(m.group(0).rstrip("( ") for m in
                       re.finditer(r"at::(?:bmm|baddbmm)(?:_out)?\s*\(|\.baddbmm_\s*\(", ops)))
    widened = re.search(r"at::bmm_out\([^;]*scalar_type\(\)\)", ops) is not None
    gpu_path = re.search(r"if \(runs_kernels\(grad_output\)\)\s*return GemmSplitK\(", ops) is not None
    products = [k for k in kernels if "reduce" not in k]
    return {"gemm_calls": calls, "fp32_results_from_16bit_operands": widened,
            "gpu_tensors_take_the_gemm_path": gpu_path, "kernels": kernels,
            "product_kernels": products,
            "vendor_gemm": bool(calls) and gpu_path and not products}
