// Launch interface of the fused CUDA fake-quant kernels
// (fake_quant_kernels.cu, compiled by nvcc in the CMake build when LibTorch
// has CUDA). Plain data only, so that the torch-side code
// (fake_quant_cuda.cc) and nvcc share nothing but this header.
#ifndef QUANTD_WORKER_QUANT_CUDA_FAKE_QUANT_KERNELS_H_
#define QUANTD_WORKER_QUANT_CUDA_FAKE_QUANT_KERNELS_H_

#include <cstdint>

#include "worker/quant/spec.h"

namespace quantd::quant::cuda {

enum class Storage { kFloat32, kFloat16, kBFloat16 };

// A tensor of `numel` elements viewed as [outer, n, inner] around its
// quantization axis, with its parameter slots laid out as
// kernel::KernelShape describes (layout 0 per tensor, 1 per channel, 2 per
// group). Every index fits in 32 bits (the caller checks numel < 2^31).
struct SlotShape {
  int layout = 0;
  uint32_t numel = 0;
  uint32_t n = 1;
  uint32_t inner = 1;
  uint32_t group = 1;
  uint32_t num_groups = 1;
};

// y = fake_quant(x) with one scale (and zero point) per slot: integers
// (IntFakeQuantOp) or FP8 (Fp8FakeQuantOp). `scale` and `zero_point` are
// float32 device arrays of the slot count; zero_point may be null (FP8).
struct ScaledArgs {
  Storage storage = Storage::kFloat32;
  const void* x = nullptr;
  void* y = nullptr;
  SlotShape shape;
  const float* scale = nullptr;
  const float* zero_point = nullptr;
  bool fp8 = false;
  // integers
  RoundMethod round = RoundMethod::kHalfEven;
  bool float_zero_point = false;
  float qmin = 0;
  float qmax = 0;
  // FP8
  MinifloatFormat format;
};

// y = MX fake_quant(x) for blocks of 32 along the last axis of a
// [rows, n] tensor (the tail block of a row may be shorter). With
// `scale_in` null the block scales are computed in the kernel from the
// block's amax and written to `scale_out` (rows * ceil(n / 32) floats).
struct MxArgs {
  Storage storage = Storage::kFloat32;
  const void* x = nullptr;
  void* y = nullptr;
  uint32_t rows = 0;
  uint32_t n = 0;
  const float* scale_in = nullptr;
  float* scale_out = nullptr;
  bool mxint = false;
  bool signed_zero = false;
  MinifloatFormat format;
  MxScaleMode scale_mode = MxScaleMode::kEven;
};

// Launch on the current CUDA stream of `device_index`; nullptr on success,
// else the CUDA error's text.
const char* LaunchScaled(const ScaledArgs& args, int device_index);
const char* LaunchMx(const MxArgs& args, int device_index);

}  // namespace quantd::quant::cuda

#endif  // QUANTD_WORKER_QUANT_CUDA_FAKE_QUANT_KERNELS_H_
