// OCP Microscaling (MX) formats: MXFP8 (e4m3 / e5m2), MXFP6 (e3m2 / e2m3),
// MXFP4 and MXINT8. Blocks of 32 consecutive elements along the spec's axis
// (the tail block zero-padded) share a power-of-two scale 2^X:
//
//   X = shared exponent of the block's amax (finite elements only) minus the
//       element's emax, by the scale mode (even: the reference's default,
//       floor: the OCP spec, ceil) -- see MxScaleExponent in float_bits.h;
//   FP elements:  x' = fp(x / 2^X) * 2^X, rounded to nearest even at the
//                 bit level with subnormals, saturating at max normal
//                 (448, 57344, 28, 7.5, 6);
//   MXINT8:       x' = clamp(round(x / s), -127, 127) * s, s = 2^X / 64;
//   NaN and Inf elements pass through unchanged.
//
// Exported scales are E8M0 codes, uint8 = X + 127. Fused CPU kernel (one
// pass when the blocks run along the last axis), scalar `Ref` twin and
// composed-ATen version agree bit for bit.
#ifndef QUANTD_WORKER_QUANT_MX_H_
#define QUANTD_WORKER_QUANT_MX_H_

#include <ATen/ATen.h>

#include <utility>

#include "worker/common/status.h"
#include "worker/quant/qparams.h"
#include "worker/quant/spec.h"

namespace quantd::quant::mx {

// The block scale 2^X of one block from its amax (finite, >= 0).
float ScaleFromAmax(float amax, const QuantSpec& spec);
// The same on a tensor of amax values (any device).
at::Tensor ScaleFromAmaxComposed(const at::Tensor& amax, const QuantSpec& spec);

// Per-block amax of the finite elements, shaped per ParamSizes (fused CPU /
// composed).
StatusOr<at::Tensor> BlockAmaxFused(const at::Tensor& x, const QuantSpec& spec);
StatusOr<at::Tensor> BlockAmaxComposed(const at::Tensor& x, const QuantSpec& spec);

// Fake quantization with given block scales (qp.scale, ParamSizes shape).
Status FakeQuantFused(const at::Tensor& x, const QuantSpec& spec, const QParams& qp,
                      at::Tensor& out);
Status FakeQuantRef(const at::Tensor& x, const QuantSpec& spec, const QParams& qp, at::Tensor& out);
StatusOr<at::Tensor> FakeQuantComposed(const at::Tensor& x, const QuantSpec& spec,
                                       const QParams& qp);

// Block scales from x itself, then fake quantization (one pass over memory
// when the blocks run along the last axis). Returns the scales used.
StatusOr<QParams> FakeQuantDynamicFused(const at::Tensor& x, const QuantSpec& spec,
                                        at::Tensor& out);
StatusOr<std::pair<at::Tensor, QParams>> FakeQuantDynamicComposed(const at::Tensor& x,
                                                                  const QuantSpec& spec);

// Element codes: uint8 bit patterns for the FP elements, int8 for MXINT8.
StatusOr<at::Tensor> QuantizeFused(const at::Tensor& x, const QuantSpec& spec, const QParams& qp);
StatusOr<at::Tensor> QuantizeComposed(const at::Tensor& x, const QuantSpec& spec,
                                      const QParams& qp);
// Codes and block scales back to float32 values (any device).
StatusOr<at::Tensor> DequantizeCodes(const at::Tensor& codes, const QuantSpec& spec,
                                     const QParams& qp);

// E8M0 codes (uint8, log2(scale) + 127, clamped to [0, 254]) of power-of-two
// block scales.
at::Tensor E8M0Codes(const at::Tensor& scale);

}  // namespace quantd::quant::mx

#endif  // QUANTD_WORKER_QUANT_MX_H_
