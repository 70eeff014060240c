// Bit-exact scalar building blocks of the quantization kernels: float32 bit
// casts, float16/bfloat16 conversions (round to nearest even, as c10::Half
// and c10::BFloat16 do), rounding to an integer by the three round methods,
// rounding to a minifloat grid (FP8, FP6, FP4 elements) and the MX shared
// exponent. Everything is branch-free inline code so the fused kernels'
// loops vectorise; each has a `...Ref` twin written the obvious way
// (std::nearbyint, std::frexp, std::ldexp) that the tests hold it against.
//
// Torch-free: usable by any engine code.
#ifndef QUANTD_WORKER_QUANT_FLOAT_BITS_H_
#define QUANTD_WORKER_QUANT_FLOAT_BITS_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "worker/quant/format_table.h"
#include "worker/quant/spec.h"

// The element helpers must inline into the kernels' loops for those to
// vectorise; GCC's heuristics otherwise keep some of them out of line. Under
// nvcc (and hipcc) they are also device functions: the GPU kernels
// (worker/quant/cuda/, worker/algo/cuda/) run the very same element code,
// which is what makes them bit-identical to the CPU ones (built with
// -fmad=false, or -ffp-contract=off under HIP, as the CPU kernels are with
// -ffp-contract=off).
#if defined(__CUDACC__) || defined(__HIP__)
#define QD_HOST_DEVICE __host__ __device__
#define QD_ALWAYS_INLINE __host__ __device__ __forceinline__
#elif defined(__GNUC__)
#define QD_HOST_DEVICE
#define QD_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define QD_HOST_DEVICE
#define QD_ALWAYS_INLINE inline
#endif

namespace quantd::quant {

QD_ALWAYS_INLINE uint32_t BitsOf(float f) {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
#endif
}

QD_ALWAYS_INLINE float FloatOf(uint32_t u) {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
#endif
}

// std::min / std::max (NaN handling included: the first argument wins a
// comparison with NaN), std::fabs and std::copysign, also in device code.
template <class T>
QD_ALWAYS_INLINE T MinOf(T a, T b) {
  return b < a ? b : a;
}
template <class T>
QD_ALWAYS_INLINE T MaxOf(T a, T b) {
  return a < b ? b : a;
}
QD_ALWAYS_INLINE float AbsOf(float v) {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  return fabsf(v);
#else
  return std::fabs(v);
#endif
}
QD_ALWAYS_INLINE float CopySignOf(float magnitude, float sign) {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  return copysignf(magnitude, sign);
#else
  return std::copysign(magnitude, sign);
#endif
}

// 2^k for k in [-126, 127] (a normal float), built from its bits.
QD_ALWAYS_INLINE float Pow2(int k) { return FloatOf(static_cast<uint32_t>(k + 127) << 23); }

// ---- bfloat16 / float16 ----

QD_ALWAYS_INLINE float Bf16BitsToFloat(uint16_t h) {
  return FloatOf(static_cast<uint32_t>(h) << 16);
}

// Round to nearest even; NaN stays a (quiet) NaN.
QD_ALWAYS_INLINE uint16_t FloatToBf16Bits(float f) {
  const uint32_t u = BitsOf(f);
  const uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
  const bool is_nan = (u & 0x7FFFFFFFu) > 0x7F800000u;
  return static_cast<uint16_t>(is_nan ? ((u >> 16) | 0x40u) : rounded);
}

// IEEE half to float (exact), subnormals included.
QD_ALWAYS_INLINE float Fp16BitsToFloat(uint16_t h) {
  const uint32_t w = static_cast<uint32_t>(h) << 16;
  const uint32_t sign = w & 0x80000000u;
  const uint32_t two_w = w + w;
  const uint32_t exp_offset = 0xE0u << 23;
  const float exp_scale = FloatOf(0x7800000u);  // 2^-112
  const float normalized = FloatOf((two_w >> 4) + exp_offset) * exp_scale;
  const uint32_t magic_mask = 126u << 23;
  const float magic_bias = 0.5f;
  const float denormalized = FloatOf((two_w >> 17) | magic_mask) - magic_bias;
  const uint32_t denormalized_cutoff = 1u << 27;
  const uint32_t result =
      sign | (two_w < denormalized_cutoff ? BitsOf(denormalized) : BitsOf(normalized));
  return FloatOf(result);
}

// Float to IEEE half, round to nearest even, overflow to Inf, NaN kept.
QD_ALWAYS_INLINE uint16_t FloatToFp16Bits(float f) {
  const float scale_to_inf = FloatOf(0x77800000u);   // 2^112
  const float scale_to_zero = FloatOf(0x08800000u);  // 2^-110
  float base = (AbsOf(f) * scale_to_inf) * scale_to_zero;
  const uint32_t w = BitsOf(f);
  const uint32_t shl1_w = w + w;
  const uint32_t sign = w & 0x80000000u;
  uint32_t bias = shl1_w & 0xFF000000u;
  bias = bias < 0x71000000u ? 0x71000000u : bias;
  base = FloatOf((bias >> 1) + 0x07800000u) + base;
  const uint32_t bits = BitsOf(base);
  const uint32_t exp_bits = (bits >> 13) & 0x00007C00u;
  const uint32_t mantissa_bits = bits & 0x00000FFFu;
  const uint32_t nonsign = exp_bits + mantissa_bits;
  return static_cast<uint16_t>((sign >> 16) | (shl1_w > 0xFF000000u ? 0x7E00u : nonsign));
}

// Rounds a float32 value to the precision of `t` (float16 / bfloat16) and
// back; float32 (or any other type) is returned unchanged.
QD_ALWAYS_INLINE float RoundToFloat16(float f) { return Fp16BitsToFloat(FloatToFp16Bits(f)); }
QD_ALWAYS_INLINE float RoundToBFloat16(float f) { return Bf16BitsToFloat(FloatToBf16Bits(f)); }

// ---- integer rounding ----

// |v| above this is far outside every integer range (|zp| <= 255 and
// qmax <= 255), so the kernels clamp to it first; below it the additions of
// the rounding tricks are exact.
inline constexpr float kRoundLimit = 4194304.0f;  // 2^22

QD_ALWAYS_INLINE float ClampRoundInput(float v) {
  return MinOf(MaxOf(v, -kRoundLimit), kRoundLimit);
}

// Round half to even for |v| <= 2^22: adding 1.5 * 2^23 leaves no fraction
// bits, so the FPU's own round-to-nearest-even does the rounding.
QD_ALWAYS_INLINE float RoundHalfEven(float v) {
  const float magic = 12582912.0f;  // 1.5 * 2^23
  return (v + magic) - magic;
}

// Round half away from zero for |v| <= 2^22.
QD_ALWAYS_INLINE float RoundHalfAway(float v) {
  const float a = static_cast<float>(static_cast<int32_t>(AbsOf(v) + 0.5f));
  return CopySignOf(a, v);
}

// Floor for |v| <= 2^22.
QD_ALWAYS_INLINE float FloorSmall(float v) {
  const float t = static_cast<float>(static_cast<int32_t>(v));
  return t > v ? t - 1.0f : t;
}

template <RoundMethod R>
QD_ALWAYS_INLINE float RoundBy(float v) {
  if constexpr (R == RoundMethod::kHalfEven) {
    return RoundHalfEven(v);
  } else if constexpr (R == RoundMethod::kRound) {
    return RoundHalfAway(v);
  } else {
    return FloorSmall(v);
  }
}

inline float RoundByRef(float v, RoundMethod r) {
  switch (r) {
    case RoundMethod::kHalfEven:
      return std::nearbyint(v);
    case RoundMethod::kRound:
      return std::round(v);
    case RoundMethod::kFloor:
      return std::floor(v);
  }
  return v;
}

// ---- minifloat grids (FP8 / FP6 / FP4 elements) ----

// Exponent of the largest power of two <= |f| for finite non-zero f,
// subnormals included.
inline int FloorLog2Ref(float f) {
  int e = 0;
  std::frexp(f, &e);
  return e - 1;
}

// Rounds |v| (finite, <= max_norm after the caller's clamp) to the grid of a
// minifloat with `mbits` mantissa bits whose smallest normal exponent is
// `emin`: subnormals below 2^emin, ties to even, then saturate at max_norm.
// Returns the magnitude; the caller applies the sign. Exact: the value is
// scaled by powers of two only, and the rounding add of RoundHalfEven sees
// at most mbits + 2 integer bits.
QD_ALWAYS_INLINE float RoundMagnitudeToMinifloat(float a, int mbits, int emin, float max_norm) {
  const int e = static_cast<int>(BitsOf(a) >> 23) - 127;  // a >= 0; -127 for zero/subnormal
  const int exp = MaxOf(e, emin);
  const float up = FloatOf(static_cast<uint32_t>(127 + mbits - exp) << 23);
  const float down = FloatOf(static_cast<uint32_t>(127 - mbits + exp) << 23);
  const float q = RoundHalfEven(a * up) * down;
  return MinOf(q, max_norm);
}

inline float RoundMagnitudeToMinifloatRef(float a, int mbits, int emin, float max_norm) {
  if (a == 0.0f) return 0.0f;
  const int exp = std::max(FloorLog2Ref(a), emin);
  const double ulp = std::ldexp(1.0, exp - mbits);
  const double q = std::nearbyint(static_cast<double>(a) / ulp) * ulp;
  return static_cast<float>(std::min(q, static_cast<double>(max_norm)));
}

// v (finite) rounded to the format's grid after saturating at max_norm.
// FP8 keeps the sign of a value that rounds to zero (a float8 cast does); the
// FP6 / FP4 elements give +0 there, as the reference's MX kernel does.
QD_ALWAYS_INLINE float QuantizeToMinifloat(float v, const MinifloatFormat& f, bool signed_zero) {
  const float a = MinOf(AbsOf(v), f.max_norm);
  const float m = RoundMagnitudeToMinifloat(a, f.mbits, 1 - f.bias, f.max_norm);
  const float s = CopySignOf(m, v);
  return signed_zero ? s : (m == 0.0f ? 0.0f : s);
}

inline float QuantizeToMinifloatRef(float v, const MinifloatFormat& f, bool signed_zero) {
  const float a = std::min(std::fabs(v), f.max_norm);
  const float m = RoundMagnitudeToMinifloatRef(a, f.mbits, 1 - f.bias, f.max_norm);
  if (m == 0.0f && !signed_zero) return 0.0f;
  return v < 0.0f || std::signbit(v) ? -m : m;
}

// MinifloatKind (the special encodings, format_table.h) says which of the
// patterns are NaN / infinity.
// Bit pattern (sign at bit ebits + mbits) of a value on the grid, |q| <=
// max_norm, or of NaN (the kind's NaN; 0 for the finite kinds).
inline uint8_t EncodeMinifloat(float q, const MinifloatFormat& f, MinifloatKind kind) {
  const int width = f.ebits + f.mbits;
  if (std::isnan(q)) {
    if (kind == MinifloatKind::kE4M3Fn) return 0x7F;
    if (kind == MinifloatKind::kE5M2) return 0x7F;
    return 0;
  }
  const uint8_t sign = std::signbit(q) ? static_cast<uint8_t>(1u << width) : 0;
  const float a = std::fabs(q);
  if (a == 0.0f) return sign;
  const int emin = 1 - f.bias;
  const int e = FloorLog2Ref(a);
  if (e < emin) {  // subnormal: exponent field 0
    const int mant = static_cast<int>(std::ldexp(a, f.mbits - emin));
    return static_cast<uint8_t>(sign | mant);
  }
  const int mant = static_cast<int>(std::ldexp(a, f.mbits - e)) - (1 << f.mbits);
  return static_cast<uint8_t>(sign | ((e + f.bias) << f.mbits) | mant);
}

inline float DecodeMinifloat(uint8_t code, const MinifloatFormat& f, MinifloatKind kind) {
  const int width = f.ebits + f.mbits;
  const bool negative = (code >> width) & 1;
  const int field = (code >> f.mbits) & ((1 << f.ebits) - 1);
  const int mant = code & ((1 << f.mbits) - 1);
  const int top = (1 << f.ebits) - 1;
  float a;
  if (kind == MinifloatKind::kE4M3Fn && field == top && mant == (1 << f.mbits) - 1) {
    a = std::numeric_limits<float>::quiet_NaN();
  } else if (kind == MinifloatKind::kE5M2 && field == top) {
    a = mant == 0 ? std::numeric_limits<float>::infinity()
                  : std::numeric_limits<float>::quiet_NaN();
  } else if (field == 0) {
    a = std::ldexp(static_cast<float>(mant), 1 - f.bias - f.mbits);
  } else {
    a = std::ldexp(static_cast<float>(mant + (1 << f.mbits)), field - f.bias - f.mbits);
  }
  return negative ? -a : a;
}

// ---- MX shared scale ----

// The exponent X of an MX block's scale 2^X from the block's amax (finite,
// >= 0), as the reference computes it:
//  - even: add half an element-ulp to amax's mantissa (round at mbits),
//    truncate to the power of two, subtract emax; clamped to [-127, 127];
//    amax 0 counts as 2^-126;
//  - floor: floor(log2(amax)) - emax; ceil: ceil(log2(amax)) - emax. When
//    amax is 0 or 2^X underflows float32 (X < -149) the scale is float32's
//    epsilon, 2^-23, as in the reference; X is capped at 127.
// The result can be below -127 (a float32 subnormal scale) only for floor and
// ceil with amax < 2^-125.
QD_HOST_DEVICE inline int MxScaleExponent(float amax, MxScaleMode mode, int mbits, int emax) {
  if (mode == MxScaleMode::kEven) {
    if (amax == 0.0f) return MaxOf(-126 - emax, -127);
    const uint32_t rounded = (BitsOf(amax) + (1u << (22 - mbits))) & 0x7F800000u;
    const int field = static_cast<int>(rounded >> 23);
    if (field == 0) return -127;   // rounded to zero: log2(0) = -inf, clamped
    if (field == 255) return 127;  // rounded to infinity: log2 = +inf, clamped
    return MinOf(MaxOf(field - 127 - emax, -127), 127);
  }
  if (amax == 0.0f) return -23;
  const uint32_t bits = BitsOf(amax);
  int floor_log2;
  bool power_of_two;
  if ((bits >> 23) == 0) {  // subnormal amax
    int e = 0;
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
    power_of_two = frexpf(amax, &e) == 0.5f;
#else
    power_of_two = std::frexp(amax, &e) == 0.5f;
#endif
    floor_log2 = e - 1;
  } else {
    floor_log2 = static_cast<int>(bits >> 23) - 127;
    power_of_two = (bits & 0x7FFFFFu) == 0;
  }
  int x = floor_log2 - emax;
  if (mode == MxScaleMode::kCeil && !power_of_two) x += 1;
  if (x < -149) return -23;
  return MinOf(x, 127);
}

// 2^x as a float for x in [-149, 127] (subnormal scales included): a
// product of two normal powers of two, which is exact.
QD_ALWAYS_INLINE float Pow2Wide(int x) { return x >= -126 ? Pow2(x) : Pow2(-126) * Pow2(x + 126); }

}  // namespace quantd::quant

#endif  // QUANTD_WORKER_QUANT_FLOAT_BITS_H_
