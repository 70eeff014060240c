// The engine's quantization entry points: parameters for a tensor, fake
// quantization (quantize then dequantize, in the input's dtype) with static
// or dynamic parameters, real quantization to codes + scale + zero point (+
// E8M0 scale codes for MX) for export, and dequantization of those codes.
//
// Every QuantSpec works here: integers (per tensor / channel / group, sym or
// asym), FP8, the OCP MX formats and the float16 / bfloat16 casts. CPU
// tensors go to the fused kernels, CUDA tensors to the fused CUDA kernels
// where the build has them, anything else to the composed-ATen path; all
// give identical bits. Inputs may be float32,
// float16 or bfloat16. Errors come back as a Status (INVALID_ARGUMENT for a
// tensor that does not fit the spec); LibTorch exceptions never escape.
//
// Typical use:
//   QD_ASSIGN_OR_RETURN(QParams qp, ComputeQParams(weight, spec));   // weights
//   QD_ASSIGN_OR_RETURN(at::Tensor wq, FakeQuantize(weight, spec, qp));
//   QD_ASSIGN_OR_RETURN(at::Tensor aq, FakeQuantizeDynamic(act, act_spec));
//   QD_ASSIGN_OR_RETURN(QuantizedTensor q, RealQuantize(weight, spec, qp));
#ifndef QUANTD_WORKER_QUANT_FAKE_QUANT_H_
#define QUANTD_WORKER_QUANT_FAKE_QUANT_H_

#include <ATen/ATen.h>

#include "worker/common/status.h"
#include "worker/quant/qparams.h"
#include "worker/quant/spec.h"

namespace quantd::quant {

// Which implementation runs. kAuto: the fused kernel for CPU tensors; for
// CUDA tensors the fused CUDA kernels when the build has them
// (HasCudaKernels()) and the format and layout are ones they take, the
// composed-ATen path otherwise. kComposed forces the composed path (eager
// ATen ops, any device). kFused needs a CPU tensor. kReference is the
// scalar twin of the fused kernel (slow; for tests).
enum class KernelPath { kAuto, kFused, kComposed, kReference };

struct FakeQuantOptions {
  KernelPath path = KernelPath::kAuto;
};

// Parameters of x taken from x alone, as a weight's are: the spec's observer
// over x at the spec's granularity (min-max, percentile or MSE; MX: the
// per-block scales). Casts have no parameters (an empty QParams). For
// calibration over many batches use an Observer (observer.h).
StatusOr<QParams> ComputeQParams(const at::Tensor& x, const QuantSpec& spec,
                                 const FakeQuantOptions& options = {});

// Fake quantization with the given (calibrated) parameters; the result has
// x's shape and dtype. MX specs use qp.scale as the per-block scales when it
// is defined and compute them from x otherwise; casts ignore qp.
StatusOr<at::Tensor> FakeQuantize(const at::Tensor& x, const QuantSpec& spec, const QParams& qp,
                                  const FakeQuantOptions& options = {});

// FakeQuantize into a preallocated contiguous CPU tensor of x's shape and
// dtype (the fused kernel; saves an allocation per call).
Status FakeQuantizeInto(const at::Tensor& x, const QuantSpec& spec, const QParams& qp,
                        at::Tensor& out, const FakeQuantOptions& options = {});

// Dynamic fake quantization: the parameters come from x at this call, at the
// spec's granularity (per_tensor; per_channel, which is per-token for
// activations; per_group; MX blocks). `used`, when not null, receives them.
StatusOr<at::Tensor> FakeQuantizeDynamic(const at::Tensor& x, const QuantSpec& spec,
                                         const FakeQuantOptions& options = {},
                                         QParams* used = nullptr);

// FakeQuantizeDynamic into a preallocated contiguous CPU tensor of x's shape
// and dtype (the fused or reference kernel).
Status FakeQuantizeDynamicInto(const at::Tensor& x, const QuantSpec& spec, at::Tensor& out,
                               const FakeQuantOptions& options = {}, QParams* used = nullptr);

// Real-quantized form of a tensor, what export packs:
//  - integers: codes int8 (signed dtypes) or uint8 (unsigned) in [qmin, qmax];
//  - FP8: codes uint8 holding the e4m3fn / e5m2 bit patterns;
//  - MX: codes uint8 (element bit patterns: sign | exponent | mantissa, in
//    the low 4 / 6 / 8 bits) or int8 (MXINT8 element values), unpacked one
//    per byte, x's shape; e8m0 holds the block scales as uint8 (log2 + 127);
//  - casts: codes is x cast to float16 / bfloat16.
// qparams holds the float32 scale (and zero point) in the QParams shapes.
struct QuantizedTensor {
  at::Tensor codes;
  QParams qparams;
  at::Tensor e8m0;
};

// Quantizes x with `qp` (or, when qp is empty, parameters from x alone).
StatusOr<QuantizedTensor> RealQuantize(const at::Tensor& x, const QuantSpec& spec,
                                       const QParams& qp = {},
                                       const FakeQuantOptions& options = {});

// Back to floats of `dtype`: Dequantize(RealQuantize(x, ...)) equals the
// fake quantization of x (except FP8 infinities, which the codes saturate).
StatusOr<at::Tensor> Dequantize(const QuantizedTensor& q, const QuantSpec& spec,
                                at::ScalarType dtype = at::kFloat);

// True when this build has the fused CUDA kernels (worker/quant/cuda/), which
// FakeQuantize and FakeQuantizeDynamic use for CUDA tensors on kAuto;
// without them a GPU runs the composed-ATen path.
bool HasCudaKernels();

}  // namespace quantd::quant

#endif  // QUANTD_WORKER_QUANT_FAKE_QUANT_H_
