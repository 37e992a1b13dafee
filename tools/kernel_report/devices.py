"""The targets the kernels are compiled for and the published figures of the
devices whose occupancy the report models (H100 SXM5, MI300X)."""

NV_ARCHS = ("sm_80", "sm_90")
AMD_ARCHS = ("gfx90a", "gfx940")
THREADS_PER_BLOCK = 256  # launch.h's kThreadsPerBlock, relayout_tile.h's kRelayoutThreads

# H100 SXM5 (sm_90): 65536 32-bit registers, 228 KiB shared memory (1 KiB of it
# reserved per block), 64 warps and 32 blocks per SM; registers allocated per warp
# in units of 256: CUDA C++ Programming Guide, "Compute Capabilities", table
# "Technical Specifications per Compute Capability" (9.0),
# https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#compute-capabilities
# MI300X (gfx942; gfx940 is the same CDNA3 generation and stands in for it because
# the clang here does not know gfx942): 4 SIMDs per CU; 512 VGPRs per lane per SIMD
# (unified VGPR+AGPR file, allocated in granules of 8), at most 8 waves per SIMD,
# 64 KiB LDS per CU: AMD CDNA3 ISA reference guide, chapters 1-3,
# https://www.amd.com/content/dam/amd/en/documents/instinct-tech-docs/instruction-set-architectures/amd-instinct-mi300-cdna3-instruction-set-architecture.pdf
# and ROCm HIP "Hardware implementation",
# https://rocm.docs.amd.com/projects/HIP/en/latest/understand/hardware_implementation.html
H100 = {
    "name": "H100 SXM5", "arch": "sm_90",
    "registers_per_unit": 65536, "shared_per_unit": 228 * 1024, "shared_reserved_per_block": 1024,
    "max_warps_per_unit": 64, "max_blocks_per_unit": 32, "register_unit": 256, "warp": 32,
}
MI300X = {
    "name": "MI300X", "arch": "gfx940", "simds_per_unit": 4, "wave": 64,
    "vgprs_per_simd_lane": 512, "vgpr_granule": 8, "max_waves_per_simd": 8,
    "lds_per_unit": 64 * 1024,
}
DEVICES = (H100, MI300X)
