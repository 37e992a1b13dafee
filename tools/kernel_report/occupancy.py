"""Theoretical occupancy of a kernel's 256-thread blocks on sm_90 (blocks and warps per SM) and gfx940
(waves per SIMD), from its registers and shared memory (LDS) and the devices'
published limits."""
from __future__ import annotations

import math

from .devices import H100, MI300X, THREADS_PER_BLOCK


def sm90_occupancy(registers: int, smem: int, threads: int = THREADS_PER_BLOCK) -> dict:
    d = H100
    warps = math.ceil(threads / d["warp"])
    regs_per_warp = math.ceil(max(registers, 1) * d["warp"] / d["register_unit"]) * d["register_unit"]
    by_regs = d["registers_per_unit"] // (regs_per_warp * warps)
    by_smem = d["shared_per_unit"] // (smem + d["shared_reserved_per_block"])
    by_warps = d["max_warps_per_unit"] // warps
    blocks = min(by_regs, by_smem, by_warps, d["max_blocks_per_unit"])
    limiter = min((("registers", by_regs), ("shared memory", by_smem), ("warps", by_warps),
                   ("blocks", d["max_blocks_per_unit"])), key=lambda kv: kv[1])[0]
    return {"blocks": blocks, "occupancy": blocks * warps / d["max_warps_per_unit"], "limiter": limiter}


def gfx940_occupancy(vgpr: int, agpr: int, lds: int, threads: int = THREADS_PER_BLOCK) -> dict:
    d = MI300X
    granule = d["vgpr_granule"]
    # unified file: AGPRs follow the VGPRs, each rounded to the granule
    regs = math.ceil(max(vgpr, 1) / granule) * granule + math.ceil(agpr / granule) * granule
    by_regs = min(d["max_waves_per_simd"], d["vgprs_per_simd_lane"] // regs)
    waves_per_group = math.ceil(threads / d["wave"])  # spread over the CU's 4 SIMDs
    groups_by_lds = d["lds_per_unit"] // lds if lds else 1 << 30
    by_lds = min(d["max_waves_per_simd"], groups_by_lds * waves_per_group // d["simds_per_unit"])
    waves = min(by_regs, by_lds)
    limiter = "VGPRs" if by_regs <= by_lds else "LDS"
    if waves == d["max_waves_per_simd"]:
        limiter = "waves"
    return {"waves_per_simd": waves, "occupancy": waves / d["max_waves_per_simd"], "limiter": limiter}


def occupancy_of(k: dict) -> dict:
    """{"sm_90": ..., "gfx940": ...}: a kernel's occupancy on the targets it was compiled for."""
    nv, amd = k["targets"].get("sm_90"), k["targets"].get("gfx940")
    found = {}
    if nv:
        found["sm_90"] = sm90_occupancy(nv["registers"], nv["smem"])
    if amd:
        found["gfx940"] = gfx940_occupancy(amd["vgpr_count"], amd["agpr_count"],
                                           amd["group_segment_fixed_size"])
    return found


def occupancy_rows(kernels: list[dict]) -> list[dict]:
    return [{"kernel": k["kernel"], "role": k["role"], **occupancy_of(k)} for k in kernels]
