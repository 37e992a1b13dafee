// The one place that knows whether kernels are compiled by nvcc (CUDA) or by
// hipcc (ROCm). Kernels use only what is defined here plus __global__,
// the builtin thread indices and __syncthreads.
#pragma once

#if defined(__HIPCC__) || defined(__HIP_PLATFORM_AMD__)
#include <hip/hip_runtime.h>
#define BWDCONV_GPU_RUNTIME 1
using GpuStream = hipStream_t;
using GpuError = hipError_t;
inline GpuError gpu_last_error() { return hipGetLastError(); }
inline const char* gpu_error_string(GpuError error) { return hipGetErrorString(error); }
constexpr GpuError kGpuSuccess = hipSuccess;
constexpr GpuError kGpuInvalidValue = hipErrorInvalidValue;
#elif defined(__CUDACC__) || defined(BWDCONV_WITH_CUDA)
#include <cuda_runtime.h>
#define BWDCONV_GPU_RUNTIME 1
using GpuStream = cudaStream_t;
using GpuError = cudaError_t;
inline GpuError gpu_last_error() { return cudaGetLastError(); }
inline const char* gpu_error_string(GpuError error) { return cudaGetErrorString(error); }
constexpr GpuError kGpuSuccess = cudaSuccess;
constexpr GpuError kGpuInvalidValue = cudaErrorInvalidValue;
#endif

// Functions shared by kernels and their CPU unit tests.
#if defined(__CUDACC__) || defined(__HIPCC__)
#define BWDCONV_HOST_DEVICE __host__ __device__
#else
#define BWDCONV_HOST_DEVICE
#endif
