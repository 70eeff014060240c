// ggml's K-quant quantizers (ggml-quants.c): the reference ones
// (quantize_row_q{4,5,6}_K_ref) and the importance-weighted ones llama.cpp
// uses with an imatrix (quantize_row_q{4,5,6}_K_impl), written to perform
// the same float operations in the same order so that the blocks are
// byte-identical (ggml_types_test compares with blocks ggml itself wrote,
// tests/peers/gguf_recipe_peer_test with llama.cpp's quantizer). The file is
// compiled with -ffp-contract=off: a fused multiply-add would round
// differently.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "worker/io/gguf/ggml_block_bits.h"
#include "worker/io/gguf/ggml_quant_search.h"
#include "worker/io/gguf/ggml_types.h"

namespace quantd::gguf {
namespace {

constexpr int kQK = 256;  // elements per super-block

using search::FitPositiveScale;
using search::FitScaleAndMin;
using search::FitSymmetricScale;
using search::kGroupMaxEps;
using search::NearestInt;

// Σ x² over a super-block, in element order (as ggml sums it).
float SumSquares(const float* x) {
  float sum = 0;
  for (int l = 0; l < kQK; ++l) sum += x[l] * x[l];
  return sum;
}

// The importance-weighted quantizers' weights of one sub-block:
// qw * sqrt(sigma2 + x^2); returns their sum.
float ImportanceWeights(int n, const float* x, const float* qw, float sigma2, float* weights) {
  for (int l = 0; l < n; ++l) weights[l] = qw[l] * std::sqrt(sigma2 + x[l] * x[l]);
  float sum = 0;
  for (int l = 0; l < n; ++l) sum += weights[l];
  return sum;
}

// The tail Q4_K and Q5_K share: the eight 6-bit scales `ls` and mins `lm`
// packed into `scales` (12 bytes), the super-block's fp16 d and dmin, and
// the codes in [0, nmax] against the scales and mins as stored (a
// sub-block whose scale is 0 keeps the codes its fit gave).
void StoreScalesAndCodes(const float* x, int nmax, const uint8_t* ls, const uint8_t* lm, float d,
                         float dmin, uint8_t* d_dmin, uint8_t* scales, uint8_t* codes) {
  bits::PackScalesMinsK4(ls, lm, scales);
  bits::StoreFp16(d_dmin, d);
  bits::StoreFp16(d_dmin + 2, dmin);
  const float d_all = bits::LoadFp16(d_dmin), dmin_all = bits::LoadFp16(d_dmin + 2);
  for (int j = 0; j < kQK / 32; ++j) {
    uint8_t sc, m;
    bits::ScaleMinK4(j, scales, &sc, &m);
    const float dj = d_all * sc;
    if (!dj) continue;
    const float dm = dmin_all * m;
    for (int i = 0; i < 32; ++i) {
      const int l = NearestInt((x[32 * j + i] + dm) / dj);
      codes[32 * j + i] = static_cast<uint8_t>(std::max(0, std::min(nmax, l)));
    }
  }
}

// quantize_row_q{4,5}_K_ref's super-block: each sub-block of 32 fitted with
// weights sqrt(mean x^2) + |x|, its scale and min stored as 6-bit multiples
// of the largest / 63.
void QuantizeScalesAndMins(const float* x, int nmax, float rmin, int nstep, uint8_t* d_dmin,
                           uint8_t* scales, uint8_t* codes) {
  float mins[kQK / 32], sub_scales[kQK / 32], weights[32];
  uint8_t trial[32];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < kQK / 32; ++j) {
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(x[32 * j + l]);
    sub_scales[j] = FitScaleAndMin(32, nmax, x + 32 * j, weights, codes + 32 * j, &mins[j], trial,
                                   rmin, 0.1f, nstep);
    max_scale = std::max(max_scale, sub_scales[j]);
    max_min = std::max(max_min, mins[j]);
  }
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  uint8_t ls[kQK / 32], lm[kQK / 32];
  for (int j = 0; j < kQK / 32; ++j) {
    ls[j] = std::min<uint8_t>(63, static_cast<uint8_t>(NearestInt(inv_scale * sub_scales[j])));
    lm[j] = std::min<uint8_t>(63, static_cast<uint8_t>(NearestInt(inv_min * mins[j])));
  }
  StoreScalesAndCodes(x, nmax, ls, lm, max_scale / 63.f, max_min / 63.f, d_dmin, scales, codes);
}

// quantize_row_q{4,5}_K_impl's super-block: sub-blocks fitted with weights
// qw * sqrt(sigma2 + x^2) (sigma2 = 2 mean x^2 of the super-block), and
// the scales and mins quantized by a search weighted by each sub-block's
// total weight.
void QuantizeScalesAndMinsWeighted(const float* x, const float* qw, int nmax, uint8_t* d_dmin,
                                   uint8_t* scales, uint8_t* codes) {
  float mins[kQK / 32], sub_scales[kQK / 32], sw[kQK / 32], weights[32];
  uint8_t trial[32];
  const float sigma2 = 2 * SumSquares(x) / kQK;
  for (int j = 0; j < kQK / 32; ++j) {
    sw[j] = ImportanceWeights(32, x + 32 * j, qw + 32 * j, sigma2, weights);
    sub_scales[j] = FitScaleAndMin(32, nmax, x + 32 * j, weights, codes + 32 * j, &mins[j], trial,
                                   -0.9f, 0.05f, 36);
  }
  uint8_t ls[kQK / 32], lm[kQK / 32];
  const float d = FitPositiveScale(kQK / 32, 63, sub_scales, ls, sw);
  const float dmin = FitPositiveScale(kQK / 32, 63, mins, lm, sw);
  for (int j = 0; j < kQK / 32; ++j) {
    ls[j] = std::min<uint8_t>(63, ls[j]);
    lm[j] = std::min<uint8_t>(63, lm[j]);
  }
  StoreScalesAndCodes(x, nmax, ls, lm, d, dmin, d_dmin, scales, codes);
}

// quantize_row_q6_K_ref (qw null) and quantize_row_q6_K_impl (qw the
// importance of each element): {u8 ql[128]; u8 qh[64]; i8 scales[16];
// fp16 d}, sixteen sub-blocks of 16 with signed 8-bit scales, 6-bit codes
// split into nibbles and bit pairs.
void QuantizeQ6K(const float* src, uint8_t* dst, int64_t n, const float* qw) {
  int8_t codes[kQK];
  float scales[kQK / 16];
  for (int64_t b = 0; b < n / kQK; ++b, src += kQK, dst += 210) {
    const float* block_qw = qw ? qw + b * kQK : nullptr;
    float max_scale = 0, max_abs_scale = 0;
    for (int ib = 0; ib < kQK / 16; ++ib) {
      scales[ib] = FitSymmetricScale(16, 32, src + 16 * ib, block_qw ? block_qw + 16 * ib : nullptr,
                                     codes + 16 * ib);
      const float abs_scale = std::fabs(scales[ib]);
      if (abs_scale > max_abs_scale) {
        max_abs_scale = abs_scale;
        max_scale = scales[ib];
      }
    }
    std::memset(dst, 0, 210);
    if (max_abs_scale < kGroupMaxEps) continue;  // d = +0
    int8_t* block_scales = reinterpret_cast<int8_t*>(dst + 192);
    const float iscale = -128.f / max_scale;
    bits::StoreFp16(dst + 208, 1 / iscale);
    for (int ib = 0; ib < kQK / 16; ++ib)
      block_scales[ib] = static_cast<int8_t>(std::min(127, NearestInt(iscale * scales[ib])));
    const float d_all = bits::LoadFp16(dst + 208);
    for (int j = 0; j < kQK / 16; ++j) {
      const float d = d_all * block_scales[j];
      if (!d) continue;
      for (int i = 0; i < 16; ++i) {
        const int l = std::max(-32, std::min(31, NearestInt(src[16 * j + i] / d)));
        codes[16 * j + i] = static_cast<int8_t>(l + 32);
      }
    }
    bits::PackQ6KCodes(codes, dst, dst + 128);
  }
}

// Q2_K's tail: codes 0..3 against the 4-bit scales and mins as stored.
void StoreQ2KCodes(const float* x, uint8_t* blk, uint8_t* codes) {
  const float d_all = bits::LoadFp16(blk + 80), dmin_all = bits::LoadFp16(blk + 82);
  for (int j = 0; j < kQK / 16; ++j) {
    const float d = d_all * (blk[j] & 0xF);
    if (!d) continue;
    const float dm = dmin_all * (blk[j] >> 4);
    for (int i = 0; i < 16; ++i) {
      const int l = NearestInt((x[16 * j + i] + dm) / d);
      codes[16 * j + i] = static_cast<uint8_t>(std::max(0, std::min(3, l)));
    }
  }
  bits::PackCrumbs(codes, blk + 16);
}

// ggml's make_q3_quants with do_rmse: signed codes in [-nmax, nmax - 1]
// stored + nmax, the scale refined by moving single codes while the
// x^2-weighted fit improves (at most five passes).
float FitQ3Scale(int n, int nmax, const float* x, int8_t* codes) {
  float amax = 0;
  const float max = search::LargestMagnitude(n, x, &amax);
  if (amax < kGroupMaxEps) {
    std::fill(codes, codes + n, 0);
    return 0.f;
  }
  const float iscale = -nmax / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = std::max(-nmax, std::min(nmax - 1, NearestInt(iscale * x[i])));
    codes[i] = static_cast<int8_t>(l);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * l;
    suml2 += w * l * l;
  }
  for (int itry = 0; itry < 5; ++itry) {
    int changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i];
      float slx = sumlx - w * x[i] * codes[i];
      if (slx > 0) {
        float sl2 = suml2 - w * codes[i] * codes[i];
        const int l = std::max(-nmax, std::min(nmax - 1, NearestInt(x[i] * sl2 / slx)));
        if (l != codes[i]) {
          slx += w * x[i] * l;
          sl2 += w * l * l;
          if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
            codes[i] = static_cast<int8_t>(l);
            sumlx = slx;
            suml2 = sl2;
            ++changed;
          }
        }
      }
    }
    if (!changed) break;
  }
  for (int i = 0; i < n; ++i) codes[i] = static_cast<int8_t>(codes[i] + nmax);
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

// Q3_K's tail once the sixteen 6-bit scales `ls` (0..63, 32 = zero) and d
// are chosen: the scales packed into 12 bytes (low nibbles of 0..7 and
// 8..15 in bytes 0..7, the high bit pairs in bytes 8..11), codes -4..3
// against them as stored (a sub-block whose scale is 0 keeps the `codes`
// its fit gave), their high bits in hmask (bit b of byte m for code
// 32 * b + m) and low bit pairs in qs.
void StoreQ3K(const float* x, const int8_t* ls, float d, int8_t* codes, uint8_t* blk) {
  uint8_t* hmask = blk;
  uint8_t* qs = blk + 32;
  uint8_t* scales = blk + 96;
  std::memset(scales, 0, 12);
  for (int j = 0; j < kQK / 16; ++j) {
    int l = ls[j];
    if (j < 8) {
      scales[j] = static_cast<uint8_t>(l & 0xF);
    } else {
      scales[j - 8] |= static_cast<uint8_t>((l & 0xF) << 4);
    }
    l >>= 4;
    scales[j % 4 + 8] |= static_cast<uint8_t>(l << (2 * (j / 4)));
  }
  bits::StoreFp16(blk + 108, d);
  const float d_all = bits::LoadFp16(blk + 108);
  for (int j = 0; j < kQK / 16; ++j) {
    int8_t sc = static_cast<int8_t>(j < 8 ? scales[j] & 0xF : scales[j - 8] >> 4);
    sc = static_cast<int8_t>((sc | (((scales[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32);
    const float dj = d_all * sc;
    if (!dj) continue;
    for (int i = 0; i < 16; ++i) {
      const int l = std::max(-4, std::min(3, NearestInt(x[16 * j + i] / dj)));
      codes[16 * j + i] = static_cast<int8_t>(l + 4);
    }
  }
  bits::PackQ3KCodes(reinterpret_cast<const uint8_t*>(codes), hmask, qs);
}

}  // namespace

// Q2_K: {u8 scales[16] (scale | min << 4); u8 qs[64]; fp16 d, dmin}: per
// 16-element sub-block a scale and min fitted with weights |x| by least
// absolute error (make_qkx2_quants with use_mad), stored as 4-bit
// multiples of the largest / 15.
void QuantizeRowQ2_K(const float* src, uint8_t* dst, int64_t n) {
  uint8_t codes[kQK], trial[16];
  float weights[16], mins[kQK / 16], scales[kQK / 16];
  for (int64_t b = 0; b < n / kQK; ++b, src += kQK, dst += 84) {
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < kQK / 16; ++j) {
      for (int l = 0; l < 16; ++l) weights[l] = std::fabs(src[16 * j + l]);
      scales[j] = FitScaleAndMin(16, 3, src + 16 * j, weights, codes + 16 * j, &mins[j], trial,
                                 -0.5f, 0.1f, 15, /*use_mad=*/true);
      max_scale = std::max(max_scale, scales[j]);
      max_min = std::max(max_min, mins[j]);
    }
    if (max_scale > 0) {
      const float iscale = 15.f / max_scale;
      for (int j = 0; j < kQK / 16; ++j)
        dst[j] = static_cast<uint8_t>(NearestInt(iscale * scales[j]));
      bits::StoreFp16(dst + 80, max_scale / 15.f);
    } else {
      std::memset(dst, 0, kQK / 16);
      bits::StoreFp16(dst + 80, 0.f);
    }
    if (max_min > 0) {
      const float iscale = 15.f / max_min;
      for (int j = 0; j < kQK / 16; ++j)
        dst[j] |= static_cast<uint8_t>(NearestInt(iscale * mins[j]) << 4);
      bits::StoreFp16(dst + 82, max_min / 15.f);
    } else {
      bits::StoreFp16(dst + 82, 0.f);
    }
    StoreQ2KCodes(src, dst, codes);
  }
}

// quantize_row_q2_K_impl: weights qw * sqrt(sigma2 + x^2) (sigma2 the
// super-block's mean x^2), scales and mins quantized by make_qp_quants
// weighted by each sub-block's total weight.
void QuantizeRowQ2_KWeighted(const float* src, uint8_t* dst, int64_t n, const float* importance) {
  uint8_t codes[kQK], trial[16], ls[kQK / 16], lm[kQK / 16];
  float weights[16], mins[kQK / 16], scales[kQK / 16], sw[kQK / 16];
  for (int64_t b = 0; b < n / kQK; ++b, src += kQK, dst += 84) {
    const float* qw = importance + b * kQK;
    const float sigma2 = SumSquares(src) / kQK;
    for (int j = 0; j < kQK / 16; ++j) {
      sw[j] = ImportanceWeights(16, src + 16 * j, qw + 16 * j, sigma2, weights);
      scales[j] = FitScaleAndMin(16, 3, src + 16 * j, weights, codes + 16 * j, &mins[j], trial,
                                 -0.9f, 0.05f, 36);
    }
    const float d = FitPositiveScale(kQK / 16, 15, scales, ls, sw);
    const float dmin = FitPositiveScale(kQK / 16, 15, mins, lm, sw);
    bits::StoreFp16(dst + 80, d);
    bits::StoreFp16(dst + 82, dmin);
    for (int j = 0; j < kQK / 16; ++j) dst[j] = static_cast<uint8_t>(ls[j] | (lm[j] << 4));
    StoreQ2KCodes(src, dst, codes);
  }
}

// Q3_K: {u8 hmask[32]; u8 qs[64]; u8 scales[12]; fp16 d}: per 16-element
// sub-block a signed scale (make_q3_quants), stored as 6-bit multiples of
// the largest / -32; codes -4..3.
void QuantizeRowQ3_K(const float* src, uint8_t* dst, int64_t n) {
  int8_t codes[kQK], ls[kQK / 16];
  float scales[kQK / 16];
  for (int64_t b = 0; b < n / kQK; ++b, src += kQK, dst += 110) {
    float max_scale = 0, amax = 0;
    for (int j = 0; j < kQK / 16; ++j) {
      scales[j] = FitQ3Scale(16, 4, src + 16 * j, codes + 16 * j);
      const float scale = std::fabs(scales[j]);
      if (scale > amax) {
        amax = scale;
        max_scale = scales[j];
      }
    }
    float d = 0;
    std::fill(ls, ls + kQK / 16, 0);  // all-zero block: scale bytes 0, d = 0
    if (max_scale) {
      const float iscale = -32.f / max_scale;
      for (int j = 0; j < kQK / 16; ++j) {
        const int8_t l = static_cast<int8_t>(NearestInt(iscale * scales[j]));
        ls[j] = static_cast<int8_t>(std::max<int8_t>(-32, std::min<int8_t>(31, l)) + 32);
      }
      d = 1 / iscale;
    }
    StoreQ3K(src, ls, d, codes, dst);
  }
}

// quantize_row_q3_K_impl: codes fitted with weights qw * sqrt(sigma2 + x^2)
// (sigma2 = 2 mean x^2), the sixteen scales by make_qx_quants weighted by
// each sub-block's total weight.
void QuantizeRowQ3_KWeighted(const float* src, uint8_t* dst, int64_t n, const float* importance) {
  int8_t codes[kQK], ls[kQK / 16];
  float weights[16], scales[kQK / 16], sw[kQK / 16];
  for (int64_t b = 0; b < n / kQK; ++b, src += kQK, dst += 110) {
    const float* qw = importance + b * kQK;
    const float sigma2 = 2 * SumSquares(src) / kQK;
    for (int j = 0; j < kQK / 16; ++j) {
      sw[j] = ImportanceWeights(16, src + 16 * j, qw + 16 * j, sigma2, weights);
      scales[j] = FitSymmetricScale(16, 4, src + 16 * j, weights, codes + 16 * j);
    }
    const float d = FitSymmetricScale(kQK / 16, 32, scales, sw, ls);
    StoreQ3K(src, ls, d, codes, dst);
  }
}

// Q4_K: {fp16 d, dmin; u8 scales[12]; u8 qs[128]}.
void QuantizeRowQ4_K(const float* src, uint8_t* dst, int64_t n) {
  uint8_t codes[kQK];
  for (int64_t b = 0; b < n / kQK; ++b, src += kQK, dst += 144) {
    QuantizeScalesAndMins(src, 15, -1.f, 20, dst, dst + 4, codes);
    bits::PackQ4KCodes(codes, dst + 16);
  }
}

// Q5_K: {fp16 d, dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]}.
void QuantizeRowQ5_K(const float* src, uint8_t* dst, int64_t n) {
  uint8_t codes[kQK];
  for (int64_t b = 0; b < n / kQK; ++b, src += kQK, dst += 176) {
    QuantizeScalesAndMins(src, 31, -0.5f, 15, dst, dst + 4, codes);
    bits::PackQ5KCodes(codes, dst + 16, dst + 48);
  }
}

void QuantizeRowQ6_K(const float* src, uint8_t* dst, int64_t n) {
  QuantizeQ6K(src, dst, n, nullptr);
}

void QuantizeRowQ4_KWeighted(const float* src, uint8_t* dst, int64_t n, const float* importance) {
  uint8_t codes[kQK];
  for (int64_t b = 0; b < n / kQK; ++b, src += kQK, dst += 144) {
    QuantizeScalesAndMinsWeighted(src, importance + b * kQK, 15, dst, dst + 4, codes);
    bits::PackQ4KCodes(codes, dst + 16);
  }
}

void QuantizeRowQ5_KWeighted(const float* src, uint8_t* dst, int64_t n, const float* importance) {
  uint8_t codes[kQK];
  for (int64_t b = 0; b < n / kQK; ++b, src += kQK, dst += 176) {
    QuantizeScalesAndMinsWeighted(src, importance + b * kQK, 31, dst, dst + 4, codes);
    bits::PackQ5KCodes(codes, dst + 16, dst + 48);
  }
}

void QuantizeRowQ6_KWeighted(const float* src, uint8_t* dst, int64_t n, const float* importance) {
  QuantizeQ6K(src, dst, n, importance);
}

}  // namespace quantd::gguf
