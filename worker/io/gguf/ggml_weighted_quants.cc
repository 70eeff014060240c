// ggml's importance-weighted quantizers of the 32-element block types, the
// ones llama.cpp uses with an imatrix (ggml-quants.c
// quantize_row_q{4,5}_{0,1}_impl): each element of a block is weighted by
// qw * sqrt(sigma2 + x^2), sigma2 the row's mean x^2, and the block's scale
// (and min) searched as ggml searches them, with ggml's float operations in
// ggml's order (compiled with -ffp-contract=off).
#include <cmath>

#include "worker/io/gguf/ggml_block_bits.h"
#include "worker/io/gguf/ggml_quant_search.h"
#include "worker/io/gguf/ggml_types.h"

namespace quantd::gguf {
namespace {

constexpr int kQK = 32;

// sigma2 of a row: its mean x^2.
float RowSigma2(const float* x, int64_t n) {
  float sum_x2 = 0;
  for (int64_t j = 0; j < n; ++j) sum_x2 += x[j] * x[j];
  return sum_x2 / n;
}

void BlockWeights(const float* x, const float* qw, float sigma2, float* weight) {
  for (int j = 0; j < kQK; ++j) weight[j] = qw[j] * std::sqrt(sigma2 + x[j] * x[j]);
}

// Q4_0 / Q5_0: signed codes around 2^(bits-1), make_qx_quants' scale.
void SymmetricRow(const float* x, uint8_t* dst, int64_t n, const float* qw, int bits) {
  const float sigma2 = RowSigma2(x, n);
  const int block_bytes = bits == 4 ? 18 : 22;
  float weight[kQK];
  int8_t codes[kQK];
  for (int64_t b = 0; b < n / kQK; ++b) {
    const float* xb = x + b * kQK;
    BlockWeights(xb, qw + b * kQK, sigma2, weight);
    const float d = search::FitSymmetricScale(kQK, 1 << (bits - 1), xb, weight, codes);
    uint8_t* blk = dst + b * block_bytes;
    const uint8_t* u = reinterpret_cast<const uint8_t*>(codes);
    if (bits == 4) {
      WriteBlockQ4_0(u, d, blk);
    } else {
      bits::StoreFp16(blk, d);
      bits::PackFiveBitCodes(u, blk + 2, blk + 6);
    }
  }
}

// Q4_1 / Q5_1: codes in [0, 2^bits - 1] with a min, make_qkx3_quants' fit.
void MinMaxRow(const float* x, uint8_t* dst, int64_t n, const float* qw, int bits) {
  const float sigma2 = RowSigma2(x, n);
  const int block_bytes = bits == 4 ? 20 : 24;
  float weight[kQK];
  uint8_t codes[kQK], trial[kQK];
  for (int64_t b = 0; b < n / kQK; ++b) {
    const float* xb = x + b * kQK;
    BlockWeights(xb, qw + b * kQK, sigma2, weight);
    float neg_min = 0;
    const float d = search::FitScaleAndMin(kQK, (1 << bits) - 1, xb, weight, codes, &neg_min, trial,
                                           -0.9f, 0.05f, 36);
    uint8_t* blk = dst + b * block_bytes;
    if (bits == 4) {
      WriteBlockQ4_1(codes, d, -neg_min, blk);
    } else {
      bits::StoreFp16(blk, d);
      bits::StoreFp16(blk + 2, -neg_min);
      bits::PackFiveBitCodes(codes, blk + 4, blk + 8);
    }
  }
}

}  // namespace

void QuantizeRowQ4_0Weighted(const float* src, uint8_t* dst, int64_t n, const float* importance) {
  SymmetricRow(src, dst, n, importance, 4);
}
void QuantizeRowQ5_0Weighted(const float* src, uint8_t* dst, int64_t n, const float* importance) {
  SymmetricRow(src, dst, n, importance, 5);
}
void QuantizeRowQ4_1Weighted(const float* src, uint8_t* dst, int64_t n, const float* importance) {
  MinMaxRow(src, dst, n, importance, 4);
}
void QuantizeRowQ5_1Weighted(const float* src, uint8_t* dst, int64_t n, const float* importance) {
  MinMaxRow(src, dst, n, importance, 5);
}

}  // namespace quantd::gguf
