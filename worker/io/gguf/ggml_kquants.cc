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
  float sum_x2 = 0;
  for (int l = 0; l < kQK; ++l) sum_x2 += x[l] * x[l];
  const float sigma2 = 2 * sum_x2 / kQK;
  for (int j = 0; j < kQK / 32; ++j) {
    for (int l = 0; l < 32; ++l)
      weights[l] = qw[32 * j + l] * std::sqrt(sigma2 + x[32 * j + l] * x[32 * j + l]);
    float sumw = 0;
    for (int l = 0; l < 32; ++l) sumw += weights[l];
    sw[j] = sumw;
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

}  // namespace

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
