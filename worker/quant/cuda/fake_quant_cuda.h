// The fused CUDA path of fake quantization (fake_quant.h dispatches here for
// CUDA tensors when the build has it): integers and FP8 with given
// parameters at any granularity, and the MX formats with their block scales
// computed in the kernel (or given) for blocks along the last axis.
// Bit-identical to the fused CPU kernels (the same element_ops.h code).
//
// Built by CMake when LibTorch has CUDA (CMakeLists.txt, QUANTD_CUDA_KERNELS);
// Bazel builds, the CPU-only ones and --config=cuda alike, keep the
// composed-ATen path on a GPU.
#ifndef QUANTD_WORKER_QUANT_CUDA_FAKE_QUANT_CUDA_H_
#define QUANTD_WORKER_QUANT_CUDA_FAKE_QUANT_CUDA_H_

#include <ATen/ATen.h>

#include "worker/common/status.h"
#include "worker/quant/qparams.h"
#include "worker/quant/spec.h"

namespace quantd::quant::cuda {

// True when x (a float32 / float16 / bfloat16 CUDA tensor) and spec are
// ones the kernels take: integers and FP8 always, MX when its blocks run
// along the last axis; fewer than 2^31 elements.
bool Supports(const at::Tensor& x, const QuantSpec& spec);

// Fake quantization of x (x's shape and dtype, on its device) with qp. For
// MX an undefined qp.scale means the block scales come from x, and `used`
// (when not null) receives them.
StatusOr<at::Tensor> FakeQuantize(const at::Tensor& x, const QuantSpec& spec, const QParams& qp,
                                  QParams* used = nullptr);

}  // namespace quantd::quant::cuda

#endif  // QUANTD_WORKER_QUANT_CUDA_FAKE_QUANT_CUDA_H_
