// The fake-quantization element operations of the scaled formats (integers,
// FP8) and of the MX elements: one float in, one float out, given its slot's
// parameters. The CPU kernels (int_quant.cc, fp8.cc, mx.cc) and the CUDA
// kernels (cuda/fake_quant_kernels.cu) both apply exactly these, so the two
// agree bit for bit. Torch-free; internal to worker/quant.
//
// Every op is called as op(x, inv_scale, scale, zero_point).
#ifndef QUANTD_WORKER_QUANT_ELEMENT_OPS_H_
#define QUANTD_WORKER_QUANT_ELEMENT_OPS_H_

#include <cstdint>

#include "worker/quant/float_bits.h"
#include "worker/quant/spec.h"

namespace quantd::quant::element {

constexpr float kFloatMax = 3.40282347e+38f;  // FLT_MAX
constexpr float kTiny = 1.17549435e-38f;      // 2^-126, the smallest normal float

// ---- integers ----

// The code of x. With an integer zero point it is round(x / s) + zp (as
// at::fake_quantize_* computes it); a float zero point is added before
// rounding, round(x / s + zp), so the code stays an integer.
template <RoundMethod R, bool kFloatZp>
QD_ALWAYS_INLINE float IntCodeOf(float x, float inv_scale, float zp, float qmin, float qmax) {
  float r;
  if constexpr (kFloatZp) {
    r = RoundBy<R>(ClampRoundInput(x * inv_scale + zp));
  } else {
    r = RoundBy<R>(ClampRoundInput(x * inv_scale)) + zp;
  }
  return MinOf(MaxOf(r, qmin), qmax);
}

// Fake quantization: (q - zp) * scale; NaN passes through.
template <RoundMethod R, bool kFloatZp>
struct IntFakeQuantOp {
  float qmin;
  float qmax;
  QD_ALWAYS_INLINE float operator()(float x, float inv_scale, float scale, float zp) const {
    const float q = IntCodeOf<R, kFloatZp>(x, inv_scale, zp, qmin, qmax);
    const float y = (q - zp) * scale;
    return x != x ? x : y;
  }
};

// The integer code q.
template <RoundMethod R, bool kFloatZp>
struct IntCodeOp {
  float qmin;
  float qmax;
  QD_ALWAYS_INLINE float operator()(float x, float inv_scale, float /*scale*/, float zp) const {
    return IntCodeOf<R, kFloatZp>(x, inv_scale, zp, qmin, qmax);
  }
};

// ---- integer parameters from an observed range ----

// The scale and zero point of one integer slot.
struct IntSlotParams {
  float scale;
  float zero_point;
};

// The MinMax observer's formulas for one slot with min mn and max mx: on the
// host (qparams.cc's IntQParamsFromMinMax) and in the GPTQ CUDA kernel, so
// the two fit the same parameters. round_scale applies the scale's storage
// rounding (the identity for float32 scales). The asymmetric zero point's
// rounding clamps its input to 2^22 first, which changes nothing: the zero
// point is clamped to [qmin, qmax] after.
template <class RoundScaleFn>
QD_ALWAYS_INLINE IntSlotParams IntParamsFromMinMax(float mn, float mx, float qmin, float qmax,
                                                   bool symmetric, bool float_zero_point,
                                                   float symmetric_zero_point,
                                                   const RoundScaleFn& round_scale) {
  if (!(mn <= mx)) return {1.0f, 0.0f};  // nothing observed, or NaN
  const float min_neg = MinOf(mn, 0.0f);
  const float max_pos = MaxOf(mx, 0.0f);
  if (symmetric) {
    const float amax = MaxOf(-min_neg, max_pos);
    const float scale = round_scale(MaxOf(amax / ((qmax - qmin) / 2.0f), kScaleFloor));
    return {scale, symmetric_zero_point};
  }
  if (float_zero_point) {
    float scale = (mx - mn) / (qmax - qmin);
    scale = round_scale(scale > kScaleFloor ? scale : 1.0f);
    return {scale, qmin - mn / scale};
  }
  const float scale = round_scale(MaxOf((max_pos - min_neg) / (qmax - qmin), kScaleFloor));
  const float zp = qmin - RoundHalfEven(ClampRoundInput(min_neg / scale));
  return {scale, MinOf(MaxOf(zp, qmin), qmax)};
}

// ---- FP8 (scaled) ----

struct Fp8FakeQuantOp {
  MinifloatFormat f;
  QD_ALWAYS_INLINE float operator()(float x, float /*inv_scale*/, float scale, float /*zp*/) const {
    const float y = QuantizeToMinifloat(x / scale, f, /*signed_zero=*/true) * scale;
    return AbsOf(x) <= kFloatMax ? y : x;  // NaN and Inf pass through
  }
};

// ---- MX elements ----

// MXINT8 elements are integers in units of scale / 64; like the reference
// (which fake-quantizes them as int8 per group) that unit is kept at or
// above the smallest normal float so its reciprocal stays finite.
QD_ALWAYS_INLINE float MxIntElementScale(float scale) { return MaxOf(scale / 64.0f, kTiny); }

// True when x * (1 / scale) == x / scale for every x: scale is a power of
// two in [2^-126, 2^126].
QD_ALWAYS_INLINE bool ReciprocalIsExact(float scale) {
  const uint32_t bits = BitsOf(scale);
  const uint32_t field = bits >> 23;
  return (bits & 0x807FFFFFu) == 0 && field >= 1 && field <= 253;
}

// FP elements: x / scale onto the element grid, times the scale.
// kByReciprocal: multiply by 1 / scale instead of dividing, which gives the
// same bits when ReciprocalIsExact(scale) (every block scale except the tiny
// subnormal ones), and is faster.
template <bool kByReciprocal>
struct MxFpOp {
  MinifloatFormat f;
  bool signed_zero;
  QD_ALWAYS_INLINE float operator()(float x, float inv, float scale, float /*zp*/) const {
    const float v = kByReciprocal ? x * inv : x / scale;
    const float y = QuantizeToMinifloat(v, f, signed_zero) * scale;
    return AbsOf(x) <= kFloatMax ? y : x;
  }
};

// MXINT8 with (inv, scale) already the element unit and its reciprocal.
struct MxIntOp {
  QD_ALWAYS_INLINE float operator()(float x, float inv, float unit, float /*zp*/) const {
    const float r = RoundHalfEven(ClampRoundInput(x * inv)) + 0.0f;
    const float y = MinOf(MaxOf(r, -127.0f), 127.0f) * unit;
    return AbsOf(x) <= kFloatMax ? y : x;
  }
};

// |x| for the block amax: infinities and NaN count as 0.
QD_ALWAYS_INLINE float FiniteAbs(float x) {
  const float a = AbsOf(x);
  return a <= kFloatMax ? a : 0.0f;
}

}  // namespace quantd::quant::element

#endif  // QUANTD_WORKER_QUANT_ELEMENT_OPS_H_
