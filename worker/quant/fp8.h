// FP8 quantization (e4m3fn and e5m2) with a float scale per tensor, channel
// or group:
//
//   x' = fp8(clamp(x / scale, -max, max)) * scale,  scale = amax / max
//
// with max 448 (e4m3) or 57344 (e5m2), the FP8 rounding to nearest even
// (subnormals included), and NaN / Inf passed through unchanged. As in the
// reference the input is divided by the scale (not multiplied by its
// reciprocal). Real quantization gives the FP8 bit patterns as uint8
// (infinities saturate to the largest finite code, NaN gives 0x7F).
//
// Fused CPU kernel, scalar `Ref` twin and composed-ATen version agree bit for
// bit; fake_quant.h dispatches between them. Also exports the composed
// rounding to a minifloat grid, which the MX formats share.
#ifndef QUANTD_WORKER_QUANT_FP8_H_
#define QUANTD_WORKER_QUANT_FP8_H_

#include <ATen/ATen.h>

#include <utility>

#include "worker/common/status.h"
#include "worker/quant/float_bits.h"
#include "worker/quant/qparams.h"
#include "worker/quant/spec.h"

namespace quantd::quant::fp8 {

Status FakeQuantFused(const at::Tensor& x, const QuantSpec& spec, const QParams& qp,
                      at::Tensor& out);
Status FakeQuantRef(const at::Tensor& x, const QuantSpec& spec, const QParams& qp, at::Tensor& out);
StatusOr<at::Tensor> FakeQuantComposed(const at::Tensor& x, const QuantSpec& spec,
                                       const QParams& qp);

// Dynamic: scales from x's own amax at the spec's granularity.
StatusOr<QParams> FakeQuantDynamicFused(const at::Tensor& x, const QuantSpec& spec,
                                        at::Tensor& out);
StatusOr<std::pair<at::Tensor, QParams>> FakeQuantDynamicComposed(const at::Tensor& x,
                                                                  const QuantSpec& spec);

// amax / max_norm per slot (fused CPU reduction).
StatusOr<QParams> MinMaxQParamsFused(const at::Tensor& x, const QuantSpec& spec);

// uint8 FP8 bit patterns of x / scale, x's shape.
StatusOr<at::Tensor> QuantizeFused(const at::Tensor& x, const QuantSpec& spec, const QParams& qp);
StatusOr<at::Tensor> QuantizeComposed(const at::Tensor& x, const QuantSpec& spec,
                                      const QParams& qp);
// Codes back to float32 values times their scale (any device).
StatusOr<at::Tensor> DequantizeCodes(const at::Tensor& codes, const QuantSpec& spec,
                                     const QParams& qp);

// One element (for observers).
float FakeQuantScalar(float x, float scale, const QuantSpec& spec);

// The minifloat kind of an FP8 or MX element type.
MinifloatKind KindOf(DataType t);

// Composed-ATen rounding of finite float32 values to a minifloat grid
// (saturating), bit-identical to QuantizeToMinifloat.
at::Tensor RoundToMinifloatComposed(const at::Tensor& v, const MinifloatFormat& f,
                                    bool signed_zero);

// 2^k as float32 for an integer tensor k in [-126, 127], from the bits.
at::Tensor Pow2Composed(const at::Tensor& k);

// Composed-ATen bit patterns of values on a minifloat grid (or NaN), as
// EncodeMinifloat; uint8.
at::Tensor EncodeMinifloatComposed(const at::Tensor& q, const MinifloatFormat& f,
                                   MinifloatKind kind);

}  // namespace quantd::quant::fp8

#endif  // QUANTD_WORKER_QUANT_FP8_H_
