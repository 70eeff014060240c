// ggml's reference K-quant quantizers (ggml-quants.c quantize_row_q4_K_ref,
// quantize_row_q5_K_ref, quantize_row_q6_K_ref with their helpers
// make_qkx2_quants and make_qx_quants), written to perform the same float
// operations in the same order so that the blocks are byte-identical
// (ggml_kquants_test compares with blocks ggml itself wrote). The file is
// compiled with -ffp-contract=off: a fused multiply-add would round
// differently.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "worker/io/gguf/ggml_block_bits.h"
#include "worker/io/gguf/ggml_types.h"

namespace quantd::gguf {
namespace {

constexpr int kQK = 256;                // elements per super-block
constexpr float kGroupMaxEps = 1e-15f;  // ggml's GROUP_MAX_EPS

// ggml's nearest_int: round half to even through the float mantissa.
int NearestInt(float f) {
  float v = f + 12582912.f;
  int32_t i;
  std::memcpy(&i, &v, sizeof(i));
  return (i & 0x007fffff) - 0x00400000;
}

// ggml's make_qkx2_quants: codes in [0, nmax] with a scale and a (negated)
// min fitted by weighted least squares over nstep + 1 trial scales.
float FitScaleAndMin(int n, int nmax, const float* x, const float* weights, uint8_t* codes,
                     float* neg_min, uint8_t* trial, float rmin, float rdelta, int nstep) {
  float min = x[0], max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    const float w = weights[i];
    sum_w += w;
    sum_x += w * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    std::fill(codes, codes + n, 0);
    *neg_min = -min;
    return 0.f;
  }
  float iscale = nmax / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    const int l = NearestInt(iscale * (x[i] - min));
    codes[i] = static_cast<uint8_t>(std::max(0, std::min(nmax, l)));
    const float diff = scale * codes[i] + min - x[i];
    best_error += weights[i] * (diff * diff);
  }
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * is + nmax) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::max(0, std::min(nmax, NearestInt(iscale * (x[i] - min))));
      trial[i] = static_cast<uint8_t>(l);
      const float w = weights[i];
      sum_l += w * l;
      sum_l2 += w * l * l;
      sum_xl += w * l * x[i];
    }
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (det > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float error = 0;
      for (int i = 0; i < n; ++i) {
        const float diff = this_scale * trial[i] + this_min - x[i];
        error += weights[i] * (diff * diff);
      }
      if (error < best_error) {
        std::memcpy(codes, trial, static_cast<size_t>(n));
        best_error = error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *neg_min = -min;
  return scale;
}

// ggml's make_qx_quants with rmse_type 1 and no importance weights (weights
// x^2): signed codes in [-nmax, nmax - 1] stored + nmax, and the scale the
// best of 19 trial scales gives.
float FitSymmetricScale(int n, int nmax, const float* x, int8_t* codes) {
  float max = 0, amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    std::fill(codes, codes + n, 0);
    return 0.f;
  }
  float iscale = -nmax / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = std::max(-nmax, std::min(nmax - 1, NearestInt(iscale * x[i])));
    codes[i] = static_cast<int8_t>(l + nmax);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * l;
    suml2 += w * l * l;
  }
  float scale = suml2 ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(nmax + 0.1f * is) / max;
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::max(-nmax, std::min(nmax - 1, NearestInt(iscale * x[i])));
      const float w = x[i] * x[i];
      sumlx += w * x[i] * l;
      suml2 += w * l * l;
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) {
        const int l = NearestInt(iscale * x[i]);
        codes[i] = static_cast<int8_t>(nmax + std::max(-nmax, std::min(nmax - 1, l)));
      }
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// The part Q4_K and Q5_K share: eight sub-blocks of 32 with a 6-bit scale
// and min each (packed into `scales`, 12 bytes), the super-block's fp16 d
// and dmin, and the codes in [0, nmax] they give.
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
  std::memset(scales, 0, 12);
  for (int j = 0; j < kQK / 32; ++j) {
    const uint8_t ls =
        std::min<uint8_t>(63, static_cast<uint8_t>(NearestInt(inv_scale * sub_scales[j])));
    const uint8_t lm = std::min<uint8_t>(63, static_cast<uint8_t>(NearestInt(inv_min * mins[j])));
    if (j < 4) {
      scales[j] = ls;
      scales[j + 4] = lm;
    } else {
      scales[j + 4] = static_cast<uint8_t>((ls & 0xF) | ((lm & 0xF) << 4));
      scales[j - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
      scales[j] |= static_cast<uint8_t>((lm >> 4) << 6);
    }
  }
  bits::StoreFp16(d_dmin, max_scale / 63.f);
  bits::StoreFp16(d_dmin + 2, max_min / 63.f);
  // The codes again, against the scales and mins as stored.
  const float d_all = bits::LoadFp16(d_dmin), dmin_all = bits::LoadFp16(d_dmin + 2);
  for (int j = 0; j < kQK / 32; ++j) {
    uint8_t sc, m;
    bits::ScaleMinK4(j, scales, &sc, &m);
    const float d = d_all * sc;
    if (!d) continue;
    const float dm = dmin_all * m;
    for (int i = 0; i < 32; ++i) {
      const int l = NearestInt((x[32 * j + i] + dm) / d);
      codes[32 * j + i] = static_cast<uint8_t>(std::max(0, std::min(nmax, l)));
    }
  }
}

}  // namespace

// Q4_K: {fp16 d, dmin; u8 scales[12]; u8 qs[128]}, codes of element pairs
// (l, l + 32) of each 64 in the low and high nibbles.
void QuantizeRowQ4_K(const float* src, uint8_t* dst, int64_t n) {
  uint8_t codes[kQK];
  for (int64_t b = 0; b < n / kQK; ++b, src += kQK, dst += 144) {
    QuantizeScalesAndMins(src, 15, -1.f, 20, dst, dst + 4, codes);
    uint8_t* q = dst + 16;
    for (int j = 0; j < kQK; j += 64, q += 32)
      for (int l = 0; l < 32; ++l)
        q[l] = static_cast<uint8_t>(codes[j + l] | (codes[j + l + 32] << 4));
  }
}

// Q5_K: {fp16 d, dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]}: Q4_K's
// nibbles plus each code's fifth bit in qh (bit pair 2k, 2k+1 for the k-th
// 64 elements).
void QuantizeRowQ5_K(const float* src, uint8_t* dst, int64_t n) {
  uint8_t codes[kQK];
  for (int64_t b = 0; b < n / kQK; ++b, src += kQK, dst += 176) {
    QuantizeScalesAndMins(src, 31, -0.5f, 15, dst, dst + 4, codes);
    uint8_t* qh = dst + 16;
    uint8_t* ql = dst + 48;
    std::memset(qh, 0, 32);
    uint8_t m1 = 1, m2 = 2;
    for (int j = 0; j < kQK; j += 64, ql += 32, m1 <<= 2, m2 <<= 2) {
      for (int l = 0; l < 32; ++l) {
        int l1 = codes[j + l], l2 = codes[j + l + 32];
        if (l1 > 15) {
          l1 -= 16;
          qh[l] |= m1;
        }
        if (l2 > 15) {
          l2 -= 16;
          qh[l] |= m2;
        }
        ql[l] = static_cast<uint8_t>(l1 | (l2 << 4));
      }
    }
  }
}

// Q6_K: {u8 ql[128]; u8 qh[64]; i8 scales[16]; fp16 d}: sixteen sub-blocks
// of 16 with signed 8-bit scales, 6-bit codes split into nibbles and bit
// pairs.
void QuantizeRowQ6_K(const float* src, uint8_t* dst, int64_t n) {
  int8_t codes[kQK];
  float scales[kQK / 16];
  for (int64_t b = 0; b < n / kQK; ++b, src += kQK, dst += 210) {
    float max_scale = 0, max_abs_scale = 0;
    for (int ib = 0; ib < kQK / 16; ++ib) {
      scales[ib] = FitSymmetricScale(16, 32, src + 16 * ib, codes + 16 * ib);
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
    uint8_t* ql = dst;
    uint8_t* qh = dst + 128;
    for (int j = 0; j < kQK; j += 128, ql += 64, qh += 32) {
      for (int l = 0; l < 32; ++l) {
        const uint8_t c0 = codes[j + l], c1 = codes[j + l + 32], c2 = codes[j + l + 64],
                      c3 = codes[j + l + 96];
        ql[l] = static_cast<uint8_t>((c0 & 0xF) | ((c2 & 0xF) << 4));
        ql[l + 32] = static_cast<uint8_t>((c1 & 0xF) | ((c3 & 0xF) << 4));
        qh[l] = static_cast<uint8_t>((c0 >> 4) | ((c1 >> 4) << 2) | ((c2 >> 4) << 4) |
                                     ((c3 >> 4) << 6));
      }
    }
  }
}

}  // namespace quantd::gguf
