// The one place that knows which target the kernels are compiled for:
//   - CUDA (nvcc), HIP (hipcc), or
//   - the host: the same .cu sources compiled by the ordinary C++ compiler
//     (a translation unit that defines BWDCONV_HOST_TARGET: host_target.cpp.in)
//     and run by the CPU grid executor of host_grid.h.
// Kernels use only what is defined here plus __global__, __device__,
// __shared__, __launch_bounds__, the builtin thread indices and __syncthreads:
//   - launch_kernel(label, kernel, grid, block, stream, args...) instead of <<<>>>;
//   - global_load(address) and global_store(address, value) for every access
//     to global memory (plain accesses on GPUs; on the host they can be
//     recorded to measure coalescing and traffic, host_grid.h).
//
// Host target: what it proves and what it cannot.
//   - It runs the kernels' own code: every block of the grid, every lane, the
//     kernels' index math, bounds and control flow. Results can be compared
//     with aten bit for bit, and sanitizers see every access: ASan/UBSan an
//     out-of-bounds access or undefined arithmetic, TSan a race between lanes
//     of a block (a kernel that synchronizes runs its lanes as concurrent
//     threads meeting at a real barrier) or between blocks (blocks of other
//     kernels run in parallel).
//   - Recorded accesses give each warp's (32 lanes) and wavefront's (64 lanes)
//     sectors per access, i.e. the access pattern a GPU's memory system sees.
//   - It cannot give GPU timing, a real GPU's memory model (the host's is
//     stronger: a missing fence between blocks may pass here), warp-level
//     lockstep (lanes of a block run in order or as free threads, never as
//     warps) or wavefront intrinsics (shuffles, votes: none are used; a kernel
//     that adds one needs a host definition here first).
#pragma once

#include <cstdint>
#include <type_traits>

namespace bwdconv::hip {

// Which compilation of a kernel a launcher belongs to: launch_x<Target::host>
// runs on the host grid, launch_x<Target::device> enqueues on a GPU stream.
enum class Target { device, host };

// A stream's native handle (cudaStream_t, hipStream_t; ignored by the host).
using NativeStream = void*;

// What a launcher returns: nullptr when the launch went through, else a message.
using LaunchError = const char*;
constexpr LaunchError kInvalidLaunch = "invalid launch parameters";
// What a device launcher of a build without GPU kernels returns
// (BWDCONV_TARGET_FUNCTION).
constexpr LaunchError kNoDeviceKernels =
    "bwdconv was built without its GPU kernels, which GPU tensors need (rebuild with nvcc or "
    "hipcc available)";

// How a kernel's lanes may be run on the host grid: `independent` lanes never
// meet at a barrier (the host runs them in order, blocks in parallel);
// `synchronized` ones call __syncthreads (the host runs a block's lanes as
// concurrent threads). GPUs ignore it.
enum class Lanes { independent, synchronized };

// What a launch says about its kernel: a name (for errors and traffic
// records) and how its lanes may run.
struct KernelLabel {
  const char* name;
  Lanes lanes = Lanes::independent;
};

}  // namespace bwdconv::hip

#if defined(BWDCONV_HOST_TARGET)
#include "host_grid.h"

#define BWDCONV_KERNEL_TARGET ::bwdconv::hip::Target::host
#define BWDCONV_TARGET_NAMESPACE host_target
#define __global__
#define __device__
#define __host__
// One array per kernel instantiation, used by the block that runs: the host
// grid runs the blocks of a synchronized kernel one after the other, and one
// synchronized launch at a time (host_grid.h).
#define __shared__ static
#define __launch_bounds__(...)
#define __syncthreads() ::bwdconv::hip::host::sync_threads()
#define threadIdx (::bwdconv::hip::host::lane.thread)
#define blockIdx (::bwdconv::hip::host::lane.block)
#define blockDim (::bwdconv::hip::host::lane.block_dim)
#define gridDim (::bwdconv::hip::host::lane.grid_dim)
using dim3 = ::bwdconv::hip::host::Dim3;

// Definitions that differ between targets sit in a namespace of their target
// (BWDCONV_TARGET_NAMESPACE), so that a build linking both compilations of a
// kernel keeps both. A host-side template outside it (a launcher in a shared
// header, say) is one symbol in both objects: the linker keeps whichever it
// meets first, and a GPU launch could run the host grid's copy on device
// pointers. Kernel-only headers therefore open their target's namespace too.
namespace bwdconv::hip {
inline namespace host_target {

template <typename T>
inline T global_load(const T* address, int line = __builtin_LINE(),
                     const char* file = __builtin_FILE()) {
  host::record_access(host::Access::load, address, sizeof(T), alignof(T), file, line);
  return *address;
}

template <typename T>
inline void global_store(T* address, const T& value, int line = __builtin_LINE(),
                         const char* file = __builtin_FILE()) {
  host::record_access(host::Access::store, address, sizeof(T), alignof(T), file, line);
  *address = value;
}

// Runs every block of the grid on the host before returning.
template <typename... Params, typename... Args>
inline void launch_kernel(const KernelLabel& label, void (*kernel)(Params...), dim3 grid,
                          dim3 block, NativeStream, const Args&... args) {
  const auto body = [&] { kernel(args...); };
  host::run_grid(label, grid, block, host::LaneBody(body));
}

// Host launches run to completion and have no asynchronous errors.
inline LaunchError last_launch_error() { return nullptr; }

inline uint32_t opaque(uint32_t value) { return value; }

}  // namespace host_target
}  // namespace bwdconv::hip

#else  // a GPU target

#if defined(__HIPCC__) || defined(__HIP_PLATFORM_AMD__)
#include <hip/hip_runtime.h>
#define BWDCONV_GPU_RUNTIME 1
namespace bwdconv::hip {
inline namespace device_target {
using DeviceStream = hipStream_t;
inline LaunchError last_launch_error() {
  const hipError_t error = hipGetLastError();
  return error == hipSuccess ? nullptr : hipGetErrorString(error);
}
}  // namespace device_target
}  // namespace bwdconv::hip
#elif defined(__CUDACC__)
#include <cuda_runtime.h>
#define BWDCONV_GPU_RUNTIME 1
namespace bwdconv::hip {
inline namespace device_target {
using DeviceStream = cudaStream_t;
inline LaunchError last_launch_error() {
  const cudaError_t error = cudaGetLastError();
  return error == cudaSuccess ? nullptr : cudaGetErrorString(error);
}
}  // namespace device_target
}  // namespace bwdconv::hip
#endif

#ifdef BWDCONV_GPU_RUNTIME
#define BWDCONV_KERNEL_TARGET ::bwdconv::hip::Target::device
#define BWDCONV_TARGET_NAMESPACE device_target
namespace bwdconv::hip {
inline namespace device_target {

#if defined(__HIP_DEVICE_COMPILE__)
// On AMD every scalar access says it is global: a pointer read from shared
// memory would otherwise make a flat access, which AMD counts against both
// its memory and its LDS counters (every LDS wait would wait for the loads).
// Class objects (16-byte chunks, from kernel arguments the compiler already
// knows are global) have no copy constructor from another address space.
template <typename T>
using GlobalPointer = __attribute__((address_space(1))) T*;
#endif

template <typename T>
__device__ inline T global_load(const T* address) {
#if defined(__HIP_DEVICE_COMPILE__)
  if constexpr (std::is_scalar_v<T>) return *(GlobalPointer<const T>)address;
#endif
  return *address;
}

template <typename T>
__device__ inline void global_store(T* address, const T& value) {
#if defined(__HIP_DEVICE_COMPILE__)
  if constexpr (std::is_scalar_v<T>) {
    *(GlobalPointer<T>)address = value;
    return;
  }
#endif
  *address = value;
}

// `value`, which the compiler may no longer trace to its definition: a
// value carried by additions stays carried, not rewritten as a multiply of
// what it was computed from.
__device__ inline uint32_t opaque(uint32_t value) {
#if defined(__HIP_DEVICE_COMPILE__)
  asm("" : "+v"(value));
#elif defined(__CUDA_ARCH__)
  asm("" : "+r"(value));
#endif
  return value;
}

// Enqueues the kernel on `stream`; last_launch_error() says whether it went.
template <typename... Params, typename... Args>
inline void launch_kernel(const KernelLabel&, void (*kernel)(Params...), dim3 grid, dim3 block,
                          NativeStream stream, const Args&... args) {
  kernel<<<grid, block, 0, static_cast<DeviceStream>(stream)>>>(args...);
}

}  // namespace device_target
}  // namespace bwdconv::hip
#endif

#endif  // BWDCONV_HOST_TARGET

// Keeps the next loop rolled on GPUs (host compilers decide for themselves).
#if defined(__CUDACC__) || defined(__HIPCC__)
#define BWDCONV_NO_UNROLL _Pragma("unroll 1")
#else
#define BWDCONV_NO_UNROLL
#endif

// Functions shared by kernels and their CPU unit tests.
#if defined(__CUDACC__) || defined(__HIPCC__)
#define BWDCONV_HOST_DEVICE __host__ __device__
#else
#define BWDCONV_HOST_DEVICE
#endif

// A kernel source's host function templated on its Target (a launcher, or a
// count of the target's units), instantiated for the target this translation
// unit compiles; each .cu source ends with one such line per function:
//   BWDCONV_TARGET_FUNCTION(LaunchError, launch_x, kNoDeviceKernels, const XParams&, NativeStream);
// A build without GPU kernels (no nvcc or hipcc, or BWDCONV_FORCE_CPU=1)
// compiles the .cu sources for the host target alone, without
// BWDCONV_WITH_GPU_KERNELS; there the same line also defines the device's
// function, which returns `without_device` (kNoDeviceKernels for a launcher).
#if defined(BWDCONV_HOST_TARGET) && !defined(BWDCONV_WITH_GPU_KERNELS)
#define BWDCONV_WITHOUT_DEVICE(result, function, without_device, ...) \
  template <>                                                         \
  result function<::bwdconv::hip::Target::device>(__VA_ARGS__) {      \
    return without_device;                                            \
  }
#else
#define BWDCONV_WITHOUT_DEVICE(result, function, without_device, ...)
#endif

#define BWDCONV_TARGET_FUNCTION(result, function, without_device, ...)   \
  BWDCONV_WITHOUT_DEVICE(result, function, without_device, __VA_ARGS__) \
  template result function<BWDCONV_KERNEL_TARGET>(__VA_ARGS__)
