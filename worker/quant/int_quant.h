// Integer quantization (int2/3/4/8, uint2/3/4/8), per tensor, per channel
// (any axis) and per group, symmetric and asymmetric:
//
//   q = clamp(round(x * (1 / scale)) + zp, qmin, qmax),  x' = (q - zp) * scale
//
// in float32 (multiply by the float32 reciprocal, as at::fake_quantize_*
// does), round by the spec's round method. A float32 zero point is added
// before rounding, q = clamp(round(x / scale + zp)), so codes stay integers. Inputs may be float32,
// float16 or bfloat16; the output has the input's dtype. NaN passes through.
//
// Three implementations that agree bit for bit: a fused CPU kernel (one read
// and one write per element, at::parallel_for), its scalar `Ref` twin, and a
// composed-ATen version that runs on any device. The public entry points in
// fake_quant.h choose between them.
#ifndef QUANTD_WORKER_QUANT_INT_QUANT_H_
#define QUANTD_WORKER_QUANT_INT_QUANT_H_

#include <ATen/ATen.h>

#include "worker/common/status.h"
#include "worker/quant/qparams.h"
#include "worker/quant/spec.h"

namespace quantd::quant::int_quant {

// Fake quantization with given parameters. Fused / Ref: x is a contiguous
// CPU float32 / float16 / bfloat16 tensor and out a contiguous tensor of the
// same shape and dtype. qp follows the QParams shape convention.
Status FakeQuantFused(const at::Tensor& x, const QuantSpec& spec, const QParams& qp,
                      at::Tensor& out);
Status FakeQuantRef(const at::Tensor& x, const QuantSpec& spec, const QParams& qp, at::Tensor& out);
StatusOr<at::Tensor> FakeQuantComposed(const at::Tensor& x, const QuantSpec& spec,
                                       const QParams& qp);

// Dynamic fake quantization: parameters from x's own min / max (the
// spec's granularity; per-token is per_channel), then fake quantization.
// The fused version does both in one pass over memory when every parameter
// covers one contiguous span (per_group along the last axis, per_channel of
// a [channels, ...] view). Returns the parameters it used.
StatusOr<QParams> FakeQuantDynamicFused(const at::Tensor& x, const QuantSpec& spec,
                                        at::Tensor& out);
StatusOr<std::pair<at::Tensor, QParams>> FakeQuantDynamicComposed(const at::Tensor& x,
                                                                  const QuantSpec& spec);

// Min-max parameters of x at the spec's granularity (fused CPU reduction).
StatusOr<QParams> MinMaxQParamsFused(const at::Tensor& x, const QuantSpec& spec);

// Integer codes q (int8 for signed dtypes, uint8 for unsigned), x's shape.
StatusOr<at::Tensor> QuantizeFused(const at::Tensor& x, const QuantSpec& spec, const QParams& qp);
StatusOr<at::Tensor> QuantizeComposed(const at::Tensor& x, const QuantSpec& spec,
                                      const QParams& qp);

// Codes and their scale / zero point back to float32 values, (q - zp) *
// scale (any device).
StatusOr<at::Tensor> DequantizeCodes(const at::Tensor& codes, const QuantSpec& spec,
                                     const QParams& qp);

// One element, for observers that evaluate candidate ranges.
float FakeQuantScalar(float x, float scale, float zero_point, const QuantSpec& spec);

}  // namespace quantd::quant::int_quant

#endif  // QUANTD_WORKER_QUANT_INT_QUANT_H_
