"""The targets the kernels are compiled for and the published figures of the
devices modelled (H100 SXM5, MI300X): every modelled number of the report comes
from these."""

NV_ARCHS = ("sm_80", "sm_90")
AMD_ARCHS = ("gfx90a", "gfx940")
THREADS_PER_BLOCK = 256  # launch.h's kThreadsPerBlock, relayout_tile.h's kRelayoutThreads

# H100 SXM5 (sm_90):
#  - 132 SMs, 1.98 GHz boost clock (FP64/FP32 clock), 3.35 TB/s HBM3: NVIDIA H100
#    Tensor Core GPU datasheet and architecture whitepaper (2022), H100 SXM5 column;
#    collected at https://glennklockwood.com/garden/processors/h100
#  - 4 warp schedulers per SM, each issuing one warp instruction per clock (4x32
#    thread-instructions/clock/SM); 65536 32-bit registers, 228 KiB shared memory
#    (1 KiB of it reserved per block), 64 warps and 32 blocks per SM; registers
#    allocated per warp in units of 256: CUDA C++ Programming Guide, "Compute
#    Capabilities", table "Technical Specifications per Compute Capability" (9.0),
#    https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#compute-capabilities
#  - 32-bit integer add/compare/logic/shift/multiply-add: 64 results per clock per SM
#    (half the issue rate): same guide, "Arithmetic Instructions" throughput table,
#    https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#arithmetic-instructions
# MI300X (gfx942; gfx940 is the same CDNA3 generation and stands in for it because
# the clang here does not know gfx942):
#  - 304 CUs, 2.1 GHz peak engine clock, 5.3 TB/s HBM3: AMD Instinct MI300X data sheet,
#    https://www.amd.com/content/dam/amd/en/documents/instinct-tech-docs/data-sheets/amd-instinct-mi300x-data-sheet.pdf
#  - 4 SIMDs per CU, each 16 lanes wide: a wave64 vector instruction takes 4 cycles,
#    and each SIMD issues at most one instruction of a kind (VALU, SALU, vector
#    memory, LDS, scalar memory, branch/message) per 4-cycle turn; 512 VGPRs per lane
#    per SIMD (unified VGPR+AGPR file, allocated in granules of 8), at most 8 waves per
#    SIMD, 64 KiB LDS per CU: AMD CDNA3 ISA reference guide, chapters 1-3,
#    https://www.amd.com/content/dam/amd/en/documents/instinct-tech-docs/instruction-set-architectures/amd-instinct-mi300-cdna3-instruction-set-architecture.pdf
#    and ROCm HIP "Hardware implementation",
#    https://rocm.docs.amd.com/projects/HIP/en/latest/understand/hardware_implementation.html
#  - 32-bit integer multiplies (v_mul_lo/hi_u32, v_mad_u64_u32, ...) are taken as
#    quarter rate (16 cycles per wave64), the GCN/CDNA rate; conservative for the model.
# Dense (no sparsity) 16-bit tensor throughput and the last-level caches, for splitk's model:
#  - H100 SXM5: 989.4 TFLOPS BF16/FP16 dense (1,979 with sparsity), 50 MB L2: NVIDIA H100
#    Tensor Core GPU datasheet (2022) and architecture whitepaper, SXM5 column.
#  - MI300X: 1307.4 TFLOPS BF16/FP16 dense (2,614.9 with sparsity), 256 MB Infinity Cache:
#    AMD Instinct MI300X data sheet (above).
H100 = {
    "name": "H100 SXM5", "arch": "sm_90", "units": 132, "clock_hz": 1.98e9,
    "dense_16bit_flops": 989.4e12, "last_level_cache_bytes": 50e6,
    "schedulers_per_unit": 4, "lanes_per_scheduler": 32, "hbm_bytes_per_s": 3.35e12,
    "registers_per_unit": 65536, "shared_per_unit": 228 * 1024, "shared_reserved_per_block": 1024,
    "max_warps_per_unit": 64, "max_blocks_per_unit": 32, "register_unit": 256, "warp": 32,
    "int_cycles_per_warp_instruction": 2,
}
MI300X = {
    "name": "MI300X", "arch": "gfx940", "units": 304, "clock_hz": 2.1e9, "simds_per_unit": 4,
    "dense_16bit_flops": 1307.4e12, "last_level_cache_bytes": 256e6,
    "lanes_per_simd_cycle": 16, "wave": 64, "hbm_bytes_per_s": 5.3e12,
    "vgprs_per_simd_lane": 512, "vgpr_granule": 8, "max_waves_per_simd": 8,
    "lds_per_unit": 64 * 1024, "quarter_rate_cycles": 16,
}
DEVICES = (H100, MI300X)
