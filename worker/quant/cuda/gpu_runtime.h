// The GPU runtime the fused kernels are compiled for: CUDA with nvcc, or
// HIP with hipcc against a ROCm LibTorch (__HIP__, clang's HIP mode). The
// kernels (worker/quant/cuda/, worker/algo/cuda/) name only what this
// header defines for the host side, and QD_SHFL_XOR for the one warp
// operation they use; the rest of their device code (launches, shared
// memory, thread indices) is the same source in both.
#ifndef QUANTD_WORKER_QUANT_CUDA_GPU_RUNTIME_H_
#define QUANTD_WORKER_QUANT_CUDA_GPU_RUNTIME_H_

#if defined(__HIP__) || defined(__HIP_PLATFORM_AMD__)
#include <c10/hip/HIPStream.h>
#include <hip/hip_runtime.h>
#else
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>
#endif

namespace quantd::gpu {

#if defined(__HIP__) || defined(__HIP_PLATFORM_AMD__)
using Stream = hipStream_t;
inline Stream CurrentStream(int device_index) {
  return c10::hip::getCurrentHIPStream(device_index).stream();
}
// nullptr when the last launch succeeded, else the runtime's message.
inline const char* LastError() {
  const hipError_t e = hipGetLastError();
  return e == hipSuccess ? nullptr : hipGetErrorString(e);
}
// The value of lane (lane ^ off) within the lane's group of 32: AMD's
// 64-wide wavefronts hold two such groups, which an offset under 32 never
// crosses.
#define QD_SHFL_XOR(v, off) __shfl_xor((v), (off), 32)
#else
using Stream = cudaStream_t;
inline Stream CurrentStream(int device_index) {
  return c10::cuda::getCurrentCUDAStream(device_index).stream();
}
inline const char* LastError() {
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? nullptr : cudaGetErrorString(e);
}
#define QD_SHFL_XOR(v, off) __shfl_xor_sync(0xffffffffu, (v), (off))
#endif

}  // namespace quantd::gpu

#endif  // QUANTD_WORKER_QUANT_CUDA_GPU_RUNTIME_H_
