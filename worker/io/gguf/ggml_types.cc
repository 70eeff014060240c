#include "worker/io/gguf/ggml_types.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "worker/io/gguf/ggml_block_bits.h"

namespace quantd::gguf {
namespace {

constexpr GgmlTypeTraits kTraits[] = {
    {GgmlType::kF32, "F32", 1, 4, true},
    {GgmlType::kF16, "F16", 1, 2, true},
    {GgmlType::kQ4_0, "Q4_0", 32, 18, true},
    {GgmlType::kQ4_1, "Q4_1", 32, 20, true},
    {GgmlType::kQ5_0, "Q5_0", 32, 22, true},
    {GgmlType::kQ5_1, "Q5_1", 32, 24, true},
    {GgmlType::kQ8_0, "Q8_0", 32, 34, true},
    {GgmlType::kQ8_1, "Q8_1", 32, 36, false},
    {GgmlType::kQ2_K, "Q2_K", 256, 84, true},
    {GgmlType::kQ3_K, "Q3_K", 256, 110, true},
    {GgmlType::kQ4_K, "Q4_K", 256, 144, true},
    {GgmlType::kQ5_K, "Q5_K", 256, 176, true},
    {GgmlType::kQ6_K, "Q6_K", 256, 210, true},
    {GgmlType::kQ8_K, "Q8_K", 256, 292, false},
    {GgmlType::kIQ2_XXS, "IQ2_XXS", 256, 66, false},
    {GgmlType::kIQ2_XS, "IQ2_XS", 256, 74, false},
    {GgmlType::kIQ3_XXS, "IQ3_XXS", 256, 98, false},
    {GgmlType::kIQ1_S, "IQ1_S", 256, 50, false},
    {GgmlType::kIQ4_NL, "IQ4_NL", 32, 18, false},
    {GgmlType::kIQ3_S, "IQ3_S", 256, 110, false},
    {GgmlType::kIQ2_S, "IQ2_S", 256, 82, false},
    {GgmlType::kIQ4_XS, "IQ4_XS", 256, 136, false},
    {GgmlType::kI8, "I8", 1, 1, false},
    {GgmlType::kI16, "I16", 1, 2, false},
    {GgmlType::kI32, "I32", 1, 4, false},
    {GgmlType::kI64, "I64", 1, 8, false},
    {GgmlType::kF64, "F64", 1, 8, false},
    {GgmlType::kIQ1_M, "IQ1_M", 256, 56, false},
    {GgmlType::kBF16, "BF16", 1, 2, true},
    {GgmlType::kTQ1_0, "TQ1_0", 256, 54, false},
    {GgmlType::kTQ2_0, "TQ2_0", 256, 66, false},
    {GgmlType::kMXFP4, "MXFP4", 32, 17, true},
    {GgmlType::kNVFP4, "NVFP4", 64, 36, false},
    {GgmlType::kQ1_0, "Q1_0", 128, 18, false},
    {GgmlType::kQ2_0, "Q2_0", 64, 18, false},
};

using bits::LoadFp16;
using bits::LoadU16;
using bits::ScaleMinK4;

uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

float BitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace

std::optional<GgmlTypeTraits> GetGgmlTypeTraits(uint32_t type_id) {
  for (const auto& t : kTraits) {
    if (static_cast<uint32_t>(t.type) == type_id) return t;
  }
  return std::nullopt;
}

const GgmlTypeTraits& GetGgmlTypeTraits(GgmlType type) {
  for (const auto& t : kTraits) {
    if (t.type == type) return t;
  }
  return kTraits[0];  // unreachable for enum values declared above
}

std::optional<GgmlType> GgmlTypeFromName(const std::string& name) {
  for (const auto& t : kTraits) {
    if (name == t.name) return t.type;
  }
  return std::nullopt;
}

StatusOr<uint64_t> GgmlRowBytes(GgmlType type, int64_t n_elements) {
  const GgmlTypeTraits& t = GetGgmlTypeTraits(type);
  if (n_elements < 0 || n_elements % t.block_size != 0) {
    return InvalidArgumentError(std::to_string(n_elements) +
                                " elements are not a whole number of " + t.name + " blocks of " +
                                std::to_string(t.block_size));
  }
  const uint64_t blocks = static_cast<uint64_t>(n_elements / t.block_size);
  if (blocks > std::numeric_limits<uint64_t>::max() / t.type_size) {
    return InvalidArgumentError("byte size of " + std::to_string(n_elements) + " " + t.name +
                                " elements overflows");
  }
  return blocks * t.type_size;
}

float Fp16ToFp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1F;
  uint32_t mant = h & 0x3FF;
  if (exp == 0x1F) return BitsFloat(sign | 0x7F800000u | (mant << 13));  // inf / NaN
  if (exp == 0) {
    if (mant == 0) return BitsFloat(sign);
    // Subnormal half: normalise into a float32 exponent.
    int e = -1;
    do {
      ++e;
      mant <<= 1;
    } while ((mant & 0x400) == 0);
    mant &= 0x3FF;
    return BitsFloat(sign | static_cast<uint32_t>(127 - 15 - e) << 23 | (mant << 13));
  }
  return BitsFloat(sign | ((exp + (127 - 15)) << 23) | (mant << 13));
}

uint16_t Fp32ToFp16(float f) {
  const uint32_t x = FloatBits(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  const uint32_t abs = x & 0x7FFFFFFFu;
  if (abs > 0x7F800000u) return sign | 0x7E00 | static_cast<uint16_t>((abs >> 13) & 0x3FF);  // NaN
  if (abs >= 0x477FF000u) return sign | 0x7C00;  // rounds to >= 65520: inf
  if (abs < 0x38800000u) {
    // Half subnormal (or zero): scale by 2^24 and round the integer mantissa.
    if (abs < 0x33000000u) return sign;  // below half the smallest subnormal
    const uint32_t exp = abs >> 23;
    const uint32_t mant = (abs & 0x7FFFFF) | 0x800000;
    const uint32_t shift = 126 - exp;  // 14..24
    uint32_t q = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1))) ++q;
    return sign | static_cast<uint16_t>(q);
  }
  // Normal: rebias and round the 13 dropped bits to nearest even; a carry
  // out of the mantissa correctly bumps the exponent.
  uint32_t h = ((abs >> 13) - ((127 - 15) << 10));
  const uint32_t rem = abs & 0x1FFF;
  if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) ++h;
  return sign | static_cast<uint16_t>(h);
}

float Bf16ToFp32(uint16_t h) { return BitsFloat(static_cast<uint32_t>(h) << 16); }

uint16_t Fp32ToBf16(float f) {
  const uint32_t x = FloatBits(f);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((x >> 16) | 0x40);
  return static_cast<uint16_t>((x + 0x7FFF + ((x >> 16) & 1)) >> 16);
}

// The dequantizers below keep ggml's expression shapes (multiplication
// order, separate multiply and add) so float rounding matches; the BUILD file
// compiles them with -ffp-contract=off so no FMA fuses what ggml rounds twice.

void DequantizeRowQ4_0(const uint8_t* src, float* dst, int64_t n) {
  constexpr int kQK = 32;
  for (int64_t b = 0; b < n / kQK; ++b) {
    const uint8_t* blk = src + b * 18;
    const float d = LoadFp16(blk);
    const uint8_t* qs = blk + 2;
    for (int j = 0; j < kQK / 2; ++j) {
      const int x0 = (qs[j] & 0x0F) - 8;
      const int x1 = (qs[j] >> 4) - 8;
      dst[b * kQK + j] = x0 * d;
      dst[b * kQK + j + kQK / 2] = x1 * d;
    }
  }
}

void DequantizeRowQ4_1(const uint8_t* src, float* dst, int64_t n) {
  constexpr int kQK = 32;
  for (int64_t b = 0; b < n / kQK; ++b) {
    const uint8_t* blk = src + b * 20;
    const float d = LoadFp16(blk);
    const float m = LoadFp16(blk + 2);
    const uint8_t* qs = blk + 4;
    for (int j = 0; j < kQK / 2; ++j) {
      const int x0 = qs[j] & 0x0F;
      const int x1 = qs[j] >> 4;
      dst[b * kQK + j] = x0 * d + m;
      dst[b * kQK + j + kQK / 2] = x1 * d + m;
    }
  }
}

void DequantizeRowQ8_0(const uint8_t* src, float* dst, int64_t n) {
  constexpr int kQK = 32;
  for (int64_t b = 0; b < n / kQK; ++b) {
    const uint8_t* blk = src + b * 34;
    const float d = LoadFp16(blk);
    const int8_t* qs = reinterpret_cast<const int8_t*>(blk + 2);
    for (int j = 0; j < kQK; ++j) dst[b * kQK + j] = qs[j] * d;
  }
}

namespace {

// Q5_0 (x = (q - 16) * d) and Q5_1 (x = q * d + m): the fifth bit of element
// j sits in bit j of the block's 32-bit qh (little-endian), the low nibbles
// as in Q4_0 / Q4_1.
void DequantizeFiveBitRow(const uint8_t* src, float* dst, int64_t n, bool with_min) {
  constexpr int kQK = 32;
  const int header = with_min ? 4 : 2;  // fp16 d (and m)
  for (int64_t b = 0; b < n / kQK; ++b) {
    const uint8_t* blk = src + b * (header + 20);
    const float d = LoadFp16(blk);
    const float m = with_min ? LoadFp16(blk + 2) : 0.0f;
    const uint32_t qh = bits::LoadU32(blk + header);
    const uint8_t* qs = blk + header + 4;
    for (int j = 0; j < kQK / 2; ++j) {
      const int c0 = (qs[j] & 0x0F) | (((qh >> j) & 1) << 4);
      const int c1 = (qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
      dst[b * kQK + j] = with_min ? c0 * d + m : (c0 - 16) * d;
      dst[b * kQK + j + kQK / 2] = with_min ? c1 * d + m : (c1 - 16) * d;
    }
  }
}

}  // namespace

void DequantizeRowQ5_0(const uint8_t* src, float* dst, int64_t n) {
  DequantizeFiveBitRow(src, dst, n, /*with_min=*/false);
}

void DequantizeRowQ5_1(const uint8_t* src, float* dst, int64_t n) {
  DequantizeFiveBitRow(src, dst, n, /*with_min=*/true);
}

void DequantizeRowQ4_K(const uint8_t* src, float* dst, int64_t n) {
  constexpr int kQK = 256;
  float* y = dst;
  for (int64_t b = 0; b < n / kQK; ++b) {
    const uint8_t* blk = src + b * 144;
    const float d = LoadFp16(blk);
    const float min = LoadFp16(blk + 2);
    const uint8_t* scales = blk + 4;
    const uint8_t* q = blk + 16;
    int is = 0;
    uint8_t sc, m;
    for (int j = 0; j < kQK; j += 64) {
      ScaleMinK4(is + 0, scales, &sc, &m);
      const float d1 = d * sc;
      const float m1 = min * m;
      ScaleMinK4(is + 1, scales, &sc, &m);
      const float d2 = d * sc;
      const float m2 = min * m;
      for (int l = 0; l < 32; ++l) *y++ = d1 * (q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * (q[l] >> 4) - m2;
      q += 32;
      is += 2;
    }
  }
}

void DequantizeRowQ5_K(const uint8_t* src, float* dst, int64_t n) {
  constexpr int kQK = 256;
  for (int64_t b = 0; b < n / kQK; ++b, src += 176) {
    const float d = LoadFp16(src), min = LoadFp16(src + 2);
    const uint8_t* scales = src + 4;
    const uint8_t* qh = src + 16;
    const uint8_t* ql = src + 48;
    uint8_t u1 = 1, u2 = 2;
    for (int j = 0, is = 0; j < kQK; j += 64, ql += 32, is += 2, u1 <<= 2, u2 <<= 2) {
      uint8_t sc, m;
      ScaleMinK4(is, scales, &sc, &m);
      const float d1 = d * sc, m1 = min * m;
      ScaleMinK4(is + 1, scales, &sc, &m);
      const float d2 = d * sc, m2 = min * m;
      for (int l = 0; l < 32; ++l) *dst++ = d1 * ((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
      for (int l = 0; l < 32; ++l) *dst++ = d2 * ((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
    }
  }
}

void DequantizeRowQ2_K(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / 256; ++b) {
    const uint8_t* blk = src + b * 84;
    const uint8_t* sc = blk;
    const uint8_t* q = blk + 16;
    const float d = LoadFp16(blk + 80), min = LoadFp16(blk + 82);
    int is = 0;
    for (int n128 = 0; n128 < 256; n128 += 128, q += 32) {
      for (int j = 0, shift = 0; j < 4; ++j, shift += 2) {
        for (int half = 0; half < 2; ++half) {
          const uint8_t s = sc[is++];
          const float dl = d * (s & 0xF), ml = min * (s >> 4);
          for (int l = 0; l < 16; ++l)
            *dst++ = dl * static_cast<int8_t>((q[l + 16 * half] >> shift) & 3) - ml;
        }
      }
    }
  }
}

void DequantizeRowQ3_K(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / 256; ++b) {
    const uint8_t* blk = src + b * 110;
    const uint8_t* hm = blk;
    const uint8_t* q = blk + 32;
    const uint8_t* packed = blk + 96;
    const float d_all = LoadFp16(blk + 108);
    int8_t scales[16];
    for (int j = 0; j < 16; ++j) {
      const int low = j < 8 ? packed[j] & 0xF : packed[j - 8] >> 4;
      scales[j] = static_cast<int8_t>(low | (((packed[8 + j % 4] >> (2 * (j / 4))) & 3) << 4));
    }
    int is = 0;
    uint8_t m = 1;
    for (int n128 = 0; n128 < 256; n128 += 128, q += 32) {
      for (int j = 0, shift = 0; j < 4; ++j, shift += 2, m <<= 1) {
        for (int half = 0; half < 2; ++half) {
          const float dl = d_all * (scales[is++] - 32);
          for (int l = 0; l < 16; ++l) {
            const int i = l + 16 * half;
            *dst++ = dl * (static_cast<int8_t>((q[i] >> shift) & 3) - ((hm[i] & m) ? 0 : 4));
          }
        }
      }
    }
  }
}

void DequantizeRowQ6_K(const uint8_t* src, float* dst, int64_t n) {
  constexpr int kQK = 256;
  float* y = dst;
  for (int64_t b = 0; b < n / kQK; ++b) {
    const uint8_t* blk = src + b * 210;
    const uint8_t* ql = blk;
    const uint8_t* qh = blk + 128;
    const int8_t* sc = reinterpret_cast<const int8_t*>(blk + 192);
    const float d = LoadFp16(blk + 208);
    for (int n128 = 0; n128 < kQK; n128 += 128) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int8_t q1 = static_cast<int8_t>((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int8_t q2 = static_cast<int8_t>((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int8_t q3 = static_cast<int8_t>((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int8_t q4 = static_cast<int8_t>((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l + 0] = d * sc[is + 0] * q1;
        y[l + 32] = d * sc[is + 2] * q2;
        y[l + 64] = d * sc[is + 4] * q3;
        y[l + 96] = d * sc[is + 6] * q4;
      }
      y += 128;
      ql += 64;
      qh += 32;
      sc += 8;
    }
  }
}

using bits::StoreFp16;

void WriteBlockQ8_0(const int8_t* codes, float d, uint8_t* dst) {
  StoreFp16(dst, d);
  std::memcpy(dst + 2, codes, 32);
}

void WriteBlockQ4_0(const uint8_t* nibbles, float d, uint8_t* dst) {
  StoreFp16(dst, d);
  for (int j = 0; j < 16; ++j)
    dst[2 + j] = static_cast<uint8_t>((nibbles[j] & 0x0F) | (nibbles[j + 16] & 0x0F) << 4);
}

void WriteBlockQ4_1(const uint8_t* nibbles, float d, float m, uint8_t* dst) {
  StoreFp16(dst, d);
  StoreFp16(dst + 2, m);
  for (int j = 0; j < 16; ++j)
    dst[4 + j] = static_cast<uint8_t>((nibbles[j] & 0x0F) | (nibbles[j + 16] & 0x0F) << 4);
}

// The reference quantizers keep ggml's expressions (x * id, + 8.5f, the
// int8 truncation) so codes match llama.cpp's bit for bit.

void QuantizeRowQ8_0(const float* src, uint8_t* dst, int64_t n) {
  constexpr int kQK = 32;
  for (int64_t b = 0; b < n / kQK; ++b) {
    const float* x = src + b * kQK;
    float amax = 0.0f;
    for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / ((1 << 7) - 1);
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    int8_t q[kQK];
    for (int j = 0; j < kQK; ++j) q[j] = static_cast<int8_t>(std::roundf(x[j] * id));
    WriteBlockQ8_0(q, d, dst + b * 34);
  }
}

namespace {

// Q4_0 / Q5_0: d = max / -2^(bits-1) with max the element of largest
// magnitude (the first on ties), codes min(2^bits - 1, (int8)(x * (1/d) +
// 2^(bits-1) + 0.5)). Returns d.
float SymmetricBlockCodes(const float* x, int bits, uint8_t* q) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < 32; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  const int half = 1 << (bits - 1);
  const float d = max / -half;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  const float offset = static_cast<float>(half) + 0.5f;  // 8.5f, 16.5f
  for (int j = 0; j < 32; ++j)
    q[j] = static_cast<uint8_t>(
        std::min((1 << bits) - 1, static_cast<int>(static_cast<int8_t>(x[j] * id + offset))));
  return d;
}

// Q4_1 / Q5_1: d = (max - min) / (2^bits - 1), m = min, codes
// (int8)((x - min) * (1/d) + 0.5), at most 2^bits - 1 (ggml clamps Q4_1 and
// cannot exceed it for Q5_1). Returns d; `min` receives m.
float MinMaxBlockCodes(const float* x, int bits, uint8_t* q, float* min_out) {
  float min = std::numeric_limits<float>::max();
  float max = -std::numeric_limits<float>::max();
  for (int j = 0; j < 32; ++j) {
    if (x[j] < min) min = x[j];
    if (x[j] > max) max = x[j];
  }
  const float d = (max - min) / ((1 << bits) - 1);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  for (int j = 0; j < 32; ++j)
    q[j] = static_cast<uint8_t>(
        std::min((1 << bits) - 1, static_cast<int>(static_cast<int8_t>((x[j] - min) * id + 0.5f))));
  *min_out = min;
  return d;
}

}  // namespace

void QuantizeRowQ4_0(const float* src, uint8_t* dst, int64_t n) {
  for (int64_t b = 0; b < n / 32; ++b) {
    uint8_t q[32];
    const float d = SymmetricBlockCodes(src + b * 32, 4, q);
    WriteBlockQ4_0(q, d, dst + b * 18);
  }
}

void QuantizeRowQ4_1(const float* src, uint8_t* dst, int64_t n) {
  for (int64_t b = 0; b < n / 32; ++b) {
    uint8_t q[32];
    float min = 0.0f;
    const float d = MinMaxBlockCodes(src + b * 32, 4, q, &min);
    WriteBlockQ4_1(q, d, min, dst + b * 20);
  }
}

void QuantizeRowQ5_0(const float* src, uint8_t* dst, int64_t n) {
  for (int64_t b = 0; b < n / 32; ++b) {
    uint8_t q[32];
    const float d = SymmetricBlockCodes(src + b * 32, 5, q);
    uint8_t* blk = dst + b * 22;
    StoreFp16(blk, d);
    bits::PackFiveBitCodes(q, blk + 2, blk + 6);
  }
}

void QuantizeRowQ5_1(const float* src, uint8_t* dst, int64_t n) {
  for (int64_t b = 0; b < n / 32; ++b) {
    uint8_t q[32];
    float min = 0.0f;
    const float d = MinMaxBlockCodes(src + b * 32, 5, q, &min);
    uint8_t* blk = dst + b * 24;
    StoreFp16(blk, d);
    StoreFp16(blk + 2, min);
    bits::PackFiveBitCodes(q, blk + 4, blk + 8);
  }
}

Status QuantizeRow(GgmlType type, const float* src, uint8_t* dst, int64_t n) {
  if (n < 0) return InvalidArgumentError("negative element count");
  switch (type) {
    case GgmlType::kF32:
      if (n > 0) std::memcpy(dst, src, static_cast<size_t>(n) * 4);
      return OkStatus();
    case GgmlType::kF16:
    case GgmlType::kBF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = type == GgmlType::kF16 ? Fp32ToFp16(src[i]) : Fp32ToBf16(src[i]);
        dst[2 * i] = static_cast<uint8_t>(h & 0xFF);
        dst[2 * i + 1] = static_cast<uint8_t>(h >> 8);
      }
      return OkStatus();
    case GgmlType::kQ8_0:
    case GgmlType::kQ4_0:
    case GgmlType::kQ4_1:
    case GgmlType::kQ5_0:
    case GgmlType::kQ5_1:
    case GgmlType::kQ2_K:
    case GgmlType::kQ3_K:
    case GgmlType::kQ4_K:
    case GgmlType::kQ5_K:
    case GgmlType::kQ6_K: {
      using RowQuantizer = void (*)(const float*, uint8_t*, int64_t);
      const RowQuantizer quantize = type == GgmlType::kQ8_0   ? QuantizeRowQ8_0
                                    : type == GgmlType::kQ4_0 ? QuantizeRowQ4_0
                                    : type == GgmlType::kQ4_1 ? QuantizeRowQ4_1
                                    : type == GgmlType::kQ5_0 ? QuantizeRowQ5_0
                                    : type == GgmlType::kQ5_1 ? QuantizeRowQ5_1
                                    : type == GgmlType::kQ2_K ? QuantizeRowQ2_K
                                    : type == GgmlType::kQ3_K ? QuantizeRowQ3_K
                                    : type == GgmlType::kQ4_K ? QuantizeRowQ4_K
                                    : type == GgmlType::kQ5_K ? QuantizeRowQ5_K
                                                              : QuantizeRowQ6_K;
      const GgmlTypeTraits& t = GetGgmlTypeTraits(type);
      if (n % t.block_size != 0)
        return InvalidArgumentError(std::to_string(n) + " elements are not whole " + t.name +
                                    " blocks of " + std::to_string(t.block_size));
      quantize(src, dst, n);
      return OkStatus();
    }
    default:
      return UnimplementedError(std::string("writing ggml type ") + GetGgmlTypeTraits(type).name +
                                " is not supported (supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1, "
                                "Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K)");
  }
}

Status QuantizeRows(GgmlType type, const float* src, uint8_t* dst, int64_t rows, int64_t n_per_row,
                    const float* importance) {
  if (rows < 0 || n_per_row < 0) return InvalidArgumentError("negative row count or width");
  QD_ASSIGN_OR_RETURN(uint64_t row_bytes, GgmlRowBytes(type, n_per_row));
  using WeightedRow = void (*)(const float*, uint8_t*, int64_t, const float*);
  WeightedRow weighted = nullptr;
  if (importance != nullptr) {
    switch (type) {
      case GgmlType::kQ4_0:
        weighted = QuantizeRowQ4_0Weighted;
        break;
      case GgmlType::kQ4_1:
        weighted = QuantizeRowQ4_1Weighted;
        break;
      case GgmlType::kQ5_0:
        weighted = QuantizeRowQ5_0Weighted;
        break;
      case GgmlType::kQ5_1:
        weighted = QuantizeRowQ5_1Weighted;
        break;
      case GgmlType::kQ2_K:
        weighted = QuantizeRowQ2_KWeighted;
        break;
      case GgmlType::kQ3_K:
        weighted = QuantizeRowQ3_KWeighted;
        break;
      case GgmlType::kQ4_K:
        weighted = QuantizeRowQ4_KWeighted;
        break;
      case GgmlType::kQ5_K:
        weighted = QuantizeRowQ5_KWeighted;
        break;
      case GgmlType::kQ6_K:
        weighted = QuantizeRowQ6_KWeighted;
        break;
      default:
        break;
    }
  }
  if (weighted == nullptr) return QuantizeRow(type, src, dst, rows * n_per_row);
  for (int64_t r = 0; r < rows; ++r)
    weighted(src + r * n_per_row, dst + r * row_bytes, n_per_row, importance);
  return OkStatus();
}

namespace {

// ggml-common.h kvalues_mxfp4: the e2m1 values doubled.
constexpr int8_t kValuesMxfp4[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// ggml-impl.h ggml_e8m0_to_fp32_half: 2^(e-128), built from its bits.
float E8m0ToFp32Half(uint8_t e) {
  const uint32_t bits = e < 2 ? (uint32_t{0x00200000} << e) : (static_cast<uint32_t>(e) - 1) << 23;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

}  // namespace

void WriteBlockMXFP4(const uint8_t* codes, uint8_t e, uint8_t* dst) {
  dst[0] = e;
  for (int j = 0; j < 16; ++j)
    dst[1 + j] = static_cast<uint8_t>((codes[j] & 0x0F) | ((codes[j + 16] & 0x0F) << 4));
}

void DequantizeRowMXFP4(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / 32; ++b, src += 17, dst += 32) {
    const float d = E8m0ToFp32Half(src[0]);
    for (int j = 0; j < 16; ++j) {
      dst[j] = kValuesMxfp4[src[1 + j] & 0x0F] * d;
      dst[j + 16] = kValuesMxfp4[src[1 + j] >> 4] * d;
    }
  }
}

Status DequantizeRow(GgmlType type, const uint8_t* src, float* dst, int64_t n) {
  const GgmlTypeTraits& t = GetGgmlTypeTraits(type);
  if (n < 0 || n % t.block_size != 0) {
    return InvalidArgumentError(std::to_string(n) + " elements are not whole " + t.name +
                                " blocks");
  }
  switch (type) {
    case GgmlType::kF32:
      if (n > 0) std::memcpy(dst, src, static_cast<size_t>(n) * 4);
      return OkStatus();
    case GgmlType::kF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = Fp16ToFp32(LoadU16(src + 2 * i));
      return OkStatus();
    case GgmlType::kBF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = Bf16ToFp32(LoadU16(src + 2 * i));
      return OkStatus();
    case GgmlType::kQ4_0:
      DequantizeRowQ4_0(src, dst, n);
      return OkStatus();
    case GgmlType::kQ4_1:
      DequantizeRowQ4_1(src, dst, n);
      return OkStatus();
    case GgmlType::kQ5_0:
      DequantizeRowQ5_0(src, dst, n);
      return OkStatus();
    case GgmlType::kQ5_1:
      DequantizeRowQ5_1(src, dst, n);
      return OkStatus();
    case GgmlType::kQ8_0:
      DequantizeRowQ8_0(src, dst, n);
      return OkStatus();
    case GgmlType::kQ2_K:
      DequantizeRowQ2_K(src, dst, n);
      return OkStatus();
    case GgmlType::kQ3_K:
      DequantizeRowQ3_K(src, dst, n);
      return OkStatus();
    case GgmlType::kQ4_K:
      DequantizeRowQ4_K(src, dst, n);
      return OkStatus();
    case GgmlType::kQ5_K:
      DequantizeRowQ5_K(src, dst, n);
      return OkStatus();
    case GgmlType::kQ6_K:
      DequantizeRowQ6_K(src, dst, n);
      return OkStatus();
    case GgmlType::kMXFP4:
      DequantizeRowMXFP4(src, dst, n);
      return OkStatus();
    default:
      return UnimplementedError(std::string("dequantizing ggml type ") + t.name +
                                " is not supported (supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1, "
                                "Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, MXFP4)");
  }
}

}  // namespace quantd::gguf
