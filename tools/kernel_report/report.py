"""report.md: the kernels' resources, the paths through their data-movement
loops, their occupancy, the modelled ceiling of the seed lines, splitk's model
and the rules broken, as markdown tables with the text that explains them."""
from __future__ import annotations

import json
from pathlib import Path

from .compilers import Tools, tools_line
from .devices import AMD_ARCHS, H100, MI300X, NV_ARCHS


def pct(x: float) -> str:
    """A fraction as a whole percentage."""
    return f"{100 * x:.0f}%"


def path_cell(c: dict | None) -> str:
    """A path's instructions / modelled cycles, `-` where there is none."""
    return f"{c['instructions']} / {c['cycles']}" if c else "-"


def markdown(kernels, occupancy, rows, problems, tools, command, splitk=None) -> str:
    """report.md of a full run, section by section."""
    out = header(tools, command)
    out += resources_table(kernels)
    out += element_loop_table(kernels)
    out += dense_loop_table(kernels)
    out += staged_loop_table(kernels)
    out += occupancy_table(occupancy)
    out += model_section(rows, kernels, occupancy)
    out += splitk_markdown(splitk or {})
    out += rules_section(problems)
    return "\n".join(out) + "\n"


def splitk_report(splitk: dict, command: str) -> str:
    """report.md of --splitk-only: splitk's part alone."""
    return "\n".join(["# splitk: static evidence (GPU figures modelled)", "",
                      f"Command: `{command}`", ""] + splitk_markdown(splitk)) + "\n"


def write_report(out: Path | None, report: str, record_name: str, record: dict) -> None:
    """report.md and the record (JSON) into `out`; without it, the report on stdout."""
    if out:
        out.mkdir(parents=True, exist_ok=True)
        (out / "report.md").write_text(report)
        (out / record_name).write_text(json.dumps(record, indent=1, default=str) + "\n")
    else:
        print(report)


def header(tools: Tools, command: str) -> list[str]:
    """The title, what is read and what modelled, the command and the compilers."""
    return ["# csrc/hip kernels: static evidence (compiler output; GPU figures modelled)", "",
            "No GPU was used. Registers, stack, spills, LDS, scratch and instruction counts are read",
            "from the compilers' output; occupancy and throughput are **modelled** from those counts and",
            "the published device figures cited in `tools/kernel_report/devices.py`.", "",
            f"Command: `{command}`", "",
            f"Toolchain: {tools_line(tools)}", ""]


def resources_table(kernels: list[dict]) -> list[str]:
    """Registers, stack or scratch, spills, shared memory and instructions per kernel and target."""
    out = ["## Resources", "",
           "| kernel | target | regs (NV) / VGPR+AGPR, SGPR (AMD) | stack / scratch B | spills | smem / LDS B | instructions | tensor/MFMA |",
           "|---|---|---|---|---|---|---|---|"]
    for k in kernels:
        for arch in NV_ARCHS + AMD_ARCHS:
            t = k["targets"].get(arch)
            if not t:
                continue
            if arch.startswith("sm_"):
                out.append(f"| {k['kernel']} | {arch} | {t['registers']} | {t['stack']} | "
                           f"{t['spill_stores']}+{t['spill_loads']} B | {t['smem']} | {t.get('instructions', '-')} | "
                           f"{t.get('tensor_core_instructions', '-')} |")
            else:
                out.append(f"| {k['kernel']} | {arch} | {t['vgpr_count']}+{t['agpr_count']}, {t['sgpr_count']} | "
                           f"{t['private_segment_fixed_size']} | {t['vgpr_spill_count']}+{t['sgpr_spill_count']} | "
                           f"{t['group_segment_fixed_size']} | {t.get('instructions', '-')} | "
                           f"{t.get('mfma_instructions', '-')} |")
    return out


def element_loop_table(kernels: list[dict]) -> list[str]:
    """The paths through the per-element loop of each data-movement kernel and target."""
    out = ["", "## Per-element loop of the data-movement kernels", "",
           "The innermost loop holding a global store (per element, or per 16-byte chunk of a row),",
           "found by its back-edge branch. Instructions on its heaviest paths (NOPs left out; a call",
           "counts its callee): `any` path; `gather` a whole chunk by one 16-byte store, elements loaded",
           "one by one; `copy` a whole chunk by one 16-byte load; `partial` a row's first or last chunk",
           "element by element. `row` is the loop around it, once per row and thread, the inner loop",
           "left out. Each entry: instructions / modelled cycles (H100: per warp on one scheduler;",
           "MI300X: per wave on one SIMD). `inner loops` > 0: the body holds loops of its own, each",
           "counted once, so the count is a lower bound.", "",
           "| kernel | target | any | gather | copy | partial | row | end chunk | inner loops |",
           "|---|---|---|---|---|---|---|---|---|"]
    for k in kernels:
        if k["role"] != "data_movement":
            continue
        for arch in NV_ARCHS + AMD_ARCHS:
            loop = k["targets"].get(arch, {}).get("loop")
            if not loop:
                continue
            paths = loop["paths"]
            out.append(f"| {k['kernel']} | {arch} | {path_cell(paths.get('any'))} | {path_cell(paths.get('gather'))} | "
                       f"{path_cell(paths.get('copy'))} | {path_cell(paths.get('partial'))} | "
                       f"{path_cell(loop.get('row_overhead'))} | {path_cell(loop.get('end_chunk'))} | "
                       f"{loop['inner_loops']} |")
    return out


def dense_loop_table(kernels: list[dict]) -> list[str]:
    """The paths through the chunk loop of each dense walk and target."""
    out = ["", "## Chunk loop of the dense walks", "",
           "A dense walk's threads each take `passes` aligned 16-byte chunks of dst's memory, 64",
           "chunks apart, carrying the row's set-up and cursor from chunk to chunk. Paths through",
           "the chunk loop (dense_chunk_loop), each without the others' regions: `setup`, what the",
           "row set-up adds to a pass (where a chunk starts in a later row than the thread's last",
           "one left it in); `interior`, a chunk inside its row's interior gathered as in the row",
           "walk, `copy` the same by one 16-byte load; `pieces`, a chunk of rows at least a chunk",
           "long that is not interior: its row's piece gathered with the other lanes masked and",
           "stored through the lane mask; `rowend`, what such a chunk adds when it holds a row end",
           "(the next row's set-up and piece); `chunk`, a chunk whose elements are walked one by",
           "one (rows shorter than a chunk, or a kernel without the paths above), the kept element",
           "loop counted `lanes` times, and `crossing`, what the next row's set-up inside that",
           "loop adds. Instructions / modelled cycles as above.", "",
           "| kernel | target | setup | interior | copy | pieces | rowend | chunk | crossing |",
           "|---|---|---|---|---|---|---|---|---|"]
    out += path_rows(kernels, "dense_loop",
                     ("setup", "interior", "copy", "pieces", "rowend", "chunk", "crossing"))
    return out


def staged_loop_table(kernels: list[dict]) -> list[str]:
    """The paths through the tile loop of each staged walk and target."""
    out = ["", "## Tile loop of the staged walks", "",
           "A staged walk's block stages 8 KB of dst in shared memory per tile, then stores it in",
           "aligned 16-byte chunks (staged_walk.h); every warp passes its tile loop once per tile",
           "(staged_tile_loop): `tile`, the pass every warp takes (its elements staged, its chunks",
           "stored), and `sources`, what describing the tile's (row, residue) sources adds to the",
           "warps whose threads describe one. Instructions / modelled cycles as above.", "",
           "| kernel | target | tile | sources |", "|---|---|---|---|"]
    out += path_rows(kernels, "staged_loop", ("tile", "sources"))
    return out


def occupancy_table(occupancy: list[dict]) -> list[str]:
    """Theoretical occupancy per kernel on sm_90 and gfx940."""
    out = ["", "## Theoretical occupancy (modelled, 256-thread blocks)", "",
           "sm_90: blocks/SM = min(65536 / (ceil(regs*32/256)*256 * warps), 228 KiB / (smem + 1 KiB), 64 / warps, 32);",
           "occupancy = blocks * warps / 64. gfx940: waves/SIMD = min(8, 512 / ceil8(VGPR) (+ AGPRs),",
           "floor(64 KiB / LDS) * waves per group / 4); occupancy = waves / 8.", "",
           "| kernel | sm_90 blocks/SM | sm_90 occupancy | limiter | gfx940 waves/SIMD | gfx940 occupancy | limiter |",
           "|---|---|---|---|---|---|---|"]
    for r in occupancy:
        nv, amd = r.get("sm_90", {}), r.get("gfx940", {})
        out.append(f"| {r['kernel']} | {nv.get('blocks', '-')} | {pct(nv['occupancy']) if nv else '-'} | "
                   f"{nv.get('limiter', '-')} | {amd.get('waves_per_simd', '-')} | "
                   f"{pct(amd['occupancy']) if amd else '-'} | {amd.get('limiter', '-')} |")
    return out


def model_section(rows: list[dict], kernels: list[dict], occupancy: list[dict]) -> list[str]:
    """How the ceiling of the seed lines is modelled, and its summary table."""
    out = ["", "## Modelled ceiling of the data-movement kernels on the seed lines", "",
           "Per warp (H100, 32 lanes, one scheduler) or wave (MI300X, 64 lanes, one SIMD): a row-walk",
           "kernel gives each row 2^k threads (about 4 chunks each, at least 2 for rows of 32 bytes or more, at most 32), so a warp holds",
           "32 / 2^k rows and issues the row overhead once plus, per chunk it walks, the `copy` path",
           "(channels_last rows whose bytes are a multiple of 16) or the `gather` path, and the",
           "`partial` path twice when rows are not 16-byte aligned. An element-walk kernel issues its",
           "`any` path per element or channel packet. A dense walk (dst dense: the scatter buffer and",
           "dx always are, when the kernel has one) gives a warp's lanes consecutive chunks, each",
           "thread `passes` chunks 64 apart (launch.h: about 16384 groups of 64 threads, 1 to 64",
           "passes): per pass a warp issues each path one of its lanes takes once, `setup` on every",
           "thread's first pass, `crossing` once per element position at which a walking lane's",
           "chunk ends a row (averaged over the passes of the buffer, dst 16-byte aligned), `copy`",
           "instead of `interior` for channels_last rows whose bytes are a multiple of 16. A staged",
           "walk (dst dense, the row's step 2, rows that fit: layout.cpp staged_rows_fit; or the",
           "interleave's channels_last rows shorter than a chunk, staged in rows along W whose",
           "positions are packets of the channels: stages_packets) issues per",
           "tile its `tile` pass in every warp and its `sources` region in the warps that describe the",
           "tile's rows (one thread per row and residue, averaged over where in its row a tile",
           "starts), for 8 KB / warps per block of elements per warp.",
           "H100 cycles: max(instructions issued, 2 x 32-bit",
           "integer instructions); MI300X cycles: max(4 x VALU (16 for quarter-rate multiplies),",
           "4 x instructions of any other one class). Elements/s = issuers x clock x elements per warp /",
           "cycles per warp (H100: 132 x 4 schedulers x 1.98e9; MI300X: 304 x 4 SIMDs x 2.1e9).",
           "Bytes/s = that x bytes moved per written element ((written + read) x element size /",
           "written), against HBM (3.35 TB/s H100, 5.3 TB/s MI300X); the modelled rate is the lower.", ""]
    out += summary_table(rows, kernels, occupancy)
    out += ["", "Every configuration is in `kernels.json` (`model`).", ""]
    return out


def rules_section(problems: list[str]) -> list[str]:
    """The rules broken, or that none is."""
    out = ["## Rules (issue 15)", ""]
    if problems:
        out += [f"{len(problems)} violation(s):", ""] + [f"- {p}" for p in problems]
    else:
        out += ["No violation: no spill; stack frame and scratch 0 in the data-movement kernels; no",
                "compiler-made LDS; data-movement occupancy at least 50% on sm_90 and gfx940;",
                "splitk's products on tensor cores / MFMA or the vendor GEMM."]
    return out


def path_rows(kernels: list[dict], key: str, paths: tuple[str, ...]) -> list[str]:
    """A table row per kernel and target with a `key` loop (dense_loop, staged_loop):
    each of its `paths` as instructions / modelled cycles."""
    return [f"| {k['kernel']} | {arch} | " + " | ".join(path_cell(loop.get(name)) for name in paths) + " |"
            for k in kernels for arch in NV_ARCHS + AMD_ARCHS
            if (loop := k["targets"].get(arch, {}).get(key))]


def splitk_markdown(splitk: dict) -> list[str]:
    source, models = splitk.get("source", {}), splitk.get("model", [])
    out = ["## splitk: where the products run, and its modelled time on seed 001", "",
           f"From the sources: GEMM calls in csrc/ops/splitk.cpp {source.get('gemm_calls')}, "
           f"fp32 results from 16-bit operands: {source.get('fp32_results_from_16bit_operands')}, "
           f"GPU tensors take that path: {source.get('gpu_tensors_take_the_gemm_path')}; kernels in "
           f"csrc/hip/splitk.cu: {source.get('kernels')} (product kernels: {source.get('product_kernels')}). "
           f"Vendor GEMM: **{source.get('vendor_gemm')}**.", ""]
    if not models:
        return out + ["(no C++ compiler for scripts/splitk_layout.cpp: no model)", ""]
    out += ["Modelled (no GPU): bytes at HBM bandwidth, the GEMM at "
            f"{models[0]['gemm_fraction_of_peak']:.0%} of dense 16-bit tensor peak (see the comment above "
            "`model_splitk`); `no reuse` reads every operand of every tap GEMM from HBM.", "",
            "| device | chunks | steps x taps | pad us | staging us | GEMM us (flops / dy reads) | partials us | "
            "modelled us | roofline us | x roofline | no reuse us | step working set MB / cache MB |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for m in models:
        u, l = m["us"], m["layout"]
        out.append(f"| {m['device']} | {l['chunks']} | {m['step_groups']} x {l['offset_taps']} | {u['pad']} | "
                   f"{u['staging']} | {u['gemm']} ({u['gemm_flops']} / {u['gemm_grad_output_reads']}) | "
                   f"{u['partials']} | **{m['modelled_us']}** | {m['roofline_us']} | {m['times_roofline']} | "
                   f"{m['no_reuse_us']} | {m['step_working_set_mb']} / {m['last_level_cache_mb']} |")
    return out + [""]


def summary_table(rows: list[dict], kernels: list[dict], occupancy: list[dict]) -> list[str]:
    """One line per (kernel, element size, layout) over the seed lines: the worst
    configuration's instructions per element and modelled rate, and the worst
    resources of the instantiations those configurations launch."""
    by_name = {k["kernel"]: k for k in kernels}
    occ = {r["kernel"]: r for r in occupancy}
    out = ["| kernel | walk | element bytes | layout | instr/element sm_90 / gfx940 | stack sm_90 B | spills | "
           "LDS gfx940 B (compiler-made) | occupancy sm_90 / gfx940 | modelled H100 | modelled MI300X | worst line H100 / MI300X |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["kernel"], r["element_bytes"], r["layout"]), []).append(r)
    for (kernel, eb, layout), rs in sorted(groups.items()):
        def worst(dev):
            vals = [r for r in rs if r.get(dev)]
            return min(vals, key=lambda r: r[dev]["fraction_of_hbm"]) if vals else None
        wh, wm = worst(H100["name"]), worst(MI300X["name"])
        names = sorted({r["instantiation"] for r in rs if r["instantiation"]})
        ts = [by_name[n]["targets"] for n in names if n in by_name]
        stack = max((t.get("sm_90", {}).get("stack", 0) for t in ts), default=0)
        spills = sum(t.get(a, {}).get("spill_stores", 0) + t.get(a, {}).get("vgpr_spill_count", 0)
                     + t.get(a, {}).get("sgpr_spill_count", 0) for t in ts for a in NV_ARCHS + AMD_ARCHS)
        lds = max((t.get("gfx940", {}).get("group_segment_fixed_size", 0) for t in ts), default=0)
        declared = max((t.get("sm_90", {}).get("smem", 0) for t in ts), default=0)
        occ_nv = min((occ[n]["sm_90"]["occupancy"] for n in names if n in occ and "sm_90" in occ[n]), default=0)
        occ_amd = min((occ[n]["gfx940"]["occupancy"] for n in names if n in occ and "gfx940" in occ[n]),
                      default=0)
        ipe = lambda w, d: f"{w[d]['instructions_per_element']:.1f}" if w else "-"
        cell = lambda w, d: (f"{w[d]['modelled_tb_s']:.2f} TB/s ({pct(min(w[d]['fraction_of_hbm'], 1))})"
                             if w else "-")
        walks = ", ".join(sorted({r["walk"] for r in rs if r.get("walk")})) or "-"
        out.append(f"| {kernel} | {walks} | {eb} | {layout} | {ipe(wh, H100['name'])} / {ipe(wm, MI300X['name'])} | "
                   f"{stack} | {spills} | {lds} ({lds - declared}) | {pct(occ_nv)} / {pct(occ_amd)} | "
                   f"{cell(wh, H100['name'])} | {cell(wm, MI300X['name'])} | "
                   f"{wh['line'] if wh else '-'} / {wm['line'] if wm else '-'} |")
    return out
