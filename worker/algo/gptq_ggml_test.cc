#include "worker/algo/gptq_ggml.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "gtest/gtest.h"
#include "worker/algo/gptq.h"
#include "worker/io/gguf/ggml_block_grid.h"
#include "worker/io/gguf/ggml_types.h"

namespace quantd::algo {
namespace {

using gguf::GgmlType;

// Inputs near a 48-dimensional subspace plus noise, with a few loud
// channels: [tokens, cols], correlated as real activations are.
at::Tensor Inputs(int64_t tokens, int64_t cols, uint64_t seed) {
  at::manual_seed(seed);
  at::Tensor x =
      at::matmul(at::randn({tokens, 48}), at::randn({48, cols})) + 0.2 * at::randn({tokens, cols});
  at::Tensor gain = at::ones({cols});
  for (int64_t c = 0; c < cols; c += 37) gain[c] = 4.0;
  return x * gain;
}

at::Tensor HessianOf(const at::Tensor& x) {
  HessianAccumulator acc(x.size(1));
  EXPECT_TRUE(acc.Add(x.unsqueeze(0)).ok());
  return acc.hessian();
}

// ggml's own quantization of `w` with `importance` per column (what a
// recipe job without GPTQ writes), decoded.
std::vector<uint8_t> GgmlBlocks(GgmlType type, const at::Tensor& w, const at::Tensor& importance) {
  const at::Tensor wc = w.contiguous();
  const at::Tensor imp = importance.contiguous();
  std::vector<uint8_t> bytes(*gguf::GgmlRowBytes(type, wc.numel()));
  EXPECT_TRUE(gguf::QuantizeRows(type, wc.data_ptr<float>(), bytes.data(), wc.size(0), wc.size(1),
                                 imp.data_ptr<float>())
                  .ok());
  return bytes;
}

at::Tensor Decoded(GgmlType type, const std::vector<uint8_t>& bytes, int64_t rows, int64_t cols) {
  at::Tensor out = at::empty({rows, cols}, at::kFloat);
  EXPECT_TRUE(gguf::DequantizeRow(type, bytes.data(), out.data_ptr<float>(), rows * cols).ok());
  return out;
}

// What a recipe job without GPTQ writes: ggml's quantizer with the
// Hessian's diagonal as importance, decoded.
at::Tensor GgmlQuantized(GgmlType type, const at::Tensor& w, const at::Tensor& h) {
  return Decoded(type, GgmlBlocks(type, w, h.diagonal().contiguous()), w.size(0), w.size(1));
}

double OutputError(const at::Tensor& w, const at::Tensor& q, const at::Tensor& x) {
  return at::matmul(x.to(at::kDouble), (w - q).to(at::kDouble).t()).square().sum().item<double>();
}

const GgmlType kTypes[] = {GgmlType::kQ2_K, GgmlType::kQ3_K, GgmlType::kQ4_K, GgmlType::kQ5_K,
                           GgmlType::kQ6_K, GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ5_0,
                           GgmlType::kQ5_1, GgmlType::kQ8_0};

// With a diagonal Hessian no error is spread, so GPTQ is exactly: ggml's
// importance-weighted quantizer fits each block alone (importance diag H), then
// every element takes its nearest code on the block's grid. The expected
// blocks are built that way from the public pieces.
TEST(GptqGgmlTest, DiagonalHessianIsTheFitBlocksWithNearestCodes) {
  const int64_t rows = 24, cols = 512;
  for (GgmlType type : kTypes) {
    SCOPED_TRACE(gguf::GetGgmlTypeTraits(type).name);
    at::manual_seed(5);
    const at::Tensor w = at::randn({rows, cols});
    const at::Tensor diag = at::rand({cols}) + 0.5;
    const at::Tensor h = at::diag(diag);
    auto r = GptqQuantizeGgml(w, h, type);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_FALSE(r->rtn_fallback);

    const auto range = *gguf::GgmlGridCodes(type);
    const int64_t qk = gguf::GetGgmlTypeTraits(type).block_size;
    const size_t bb = gguf::GetGgmlTypeTraits(type).type_size;
    // Each block fit on its own values (a row-wide statistic of ggml's
    // weighted quantizer, Q4_0's sigma^2, sees the block alone).
    std::vector<uint8_t> expected(*gguf::GgmlRowBytes(type, rows * cols));
    for (int64_t c = 0; c < cols; c += qk) {
      std::vector<uint8_t> part = GgmlBlocks(type, w.narrow(1, c, qk), diag.narrow(0, c, qk));
      for (int64_t r = 0; r < rows; ++r)
        std::copy(part.begin() + r * bb, part.begin() + (r + 1) * bb,
                  expected.begin() + (r * (cols / qk) + c / qk) * bb);
    }
    std::vector<float> step(qk / gguf::kGridGranule), base(qk / gguf::kGridGranule);
    std::vector<uint8_t> codes(qk);
    const float* wv = w.data_ptr<float>();
    for (int64_t b = 0; b < rows * cols / qk; ++b) {
      uint8_t* blk = expected.data() + b * bb;
      gguf::GgmlBlockGrid(type, blk, step.data(), base.data());
      for (int64_t e = 0; e < qk; ++e) {
        const float s = step[e / gguf::kGridGranule], z = base[e / gguf::kGridGranule];
        int best = 0;
        float best_err = INFINITY;
        for (int c = 0; c < range.levels; ++c) {
          const float err = std::fabs(wv[b * qk + e] - gguf::GgmlGridValue(s, z, c, range.offset));
          if (err < best_err) best_err = err, best = c;
        }
        codes[e] = static_cast<uint8_t>(best);
      }
      gguf::GgmlSetBlockCodes(type, codes.data(), blk);
    }
    ASSERT_EQ(r->blocks.numel(), static_cast<int64_t>(expected.size()));
    const uint8_t* got = r->blocks.data_ptr<uint8_t>();
    int64_t differing = 0;
    for (size_t i = 0; i < expected.size(); ++i) differing += got[i] != expected[i];
    // A value exactly between two grid points may round either way.
    EXPECT_LE(differing, 2) << "bytes differing from fit + nearest code";
    EXPECT_TRUE(at::equal(r->weight, Decoded(type, expected, rows, cols)) || differing > 0);
    // The weight is the blocks' decode.
    std::vector<uint8_t> own(got, got + expected.size());
    EXPECT_TRUE(at::equal(r->weight, Decoded(type, own, rows, cols)));
  }
}

// On correlated inputs GPTQ's codes cut the layer's output error against
// ggml's own quantization with the same importance, in every type; the
// figures are printed.
TEST(GptqGgmlTest, BeatsGgmlsQuantizerOnCorrelatedInputs) {
  const int64_t rows = 64, cols = 512;
  const at::Tensor x = Inputs(4096, cols, 3);
  const at::Tensor h = HessianOf(x);
  at::manual_seed(9);
  const at::Tensor w = at::randn({rows, cols}) * 0.05;
  for (GgmlType type : kTypes) {
    const char* name = gguf::GetGgmlTypeTraits(type).name;
    auto r = GptqQuantizeGgml(w, h, type);
    ASSERT_TRUE(r.ok()) << name << ": " << r.status().message();
    const at::Tensor rtn = GgmlQuantized(type, w, h);
    const double e_gptq = OutputError(w, r->weight, x);
    const double e_rtn = OutputError(w, rtn, x);
    std::printf("%-5s output error GPTQ / ggml quantizer = %.4f\n", name, e_gptq / e_rtn);
    EXPECT_LT(e_gptq, 0.8 * e_rtn) << name;
  }
}

// act_order processes columns by decreasing diag H with every block fit
// before the loop (static_groups), and still gains on ggml's quantizer.
TEST(GptqGgmlTest, ActOrderWithStaticBlocks) {
  const int64_t rows = 32, cols = 512;
  const at::Tensor x = Inputs(2048, cols, 4);
  const at::Tensor h = HessianOf(x);
  at::manual_seed(2);
  const at::Tensor w = at::randn({rows, cols}) * 0.05;
  config::GptqOptions opt;
  opt.act_order = true;
  opt.static_groups = true;
  auto r = GptqQuantizeGgml(w, h, GgmlType::kQ4_K, opt);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const at::Tensor rtn = GgmlQuantized(GgmlType::kQ4_K, w, h);
  EXPECT_LT(OutputError(w, r->weight, x), 0.8 * OutputError(w, rtn, x));
}

TEST(GptqGgmlTest, RefusesWhatItCannotDo) {
  const at::Tensor w = at::randn({4, 256});
  const at::Tensor h = at::eye(256);
  config::GptqOptions act;
  act.act_order = true;
  auto a = GptqQuantizeGgml(w, h, GgmlType::kQ4_K, act);
  EXPECT_EQ(a.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(a.status().message().find("static_groups"), std::string::npos);
  auto f = GptqQuantizeGgml(w, h, GgmlType::kF16);
  EXPECT_EQ(f.status().code(), StatusCode::kInvalidArgument);
  auto m = GptqQuantizeGgml(at::randn({4, 96}), at::eye(96), GgmlType::kQ4_K);
  EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(m.status().message().find("not whole blocks of 256"), std::string::npos);
  auto s = GptqQuantizeGgml(w, at::eye(128), GgmlType::kQ4_K);
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
}

// A Hessian that no damping makes positive definite falls back to ggml's
// own quantizer, and says so.
TEST(GptqGgmlTest, FailedFactorisationFallsBackToGgmlsQuantizer) {
  const at::Tensor w = at::randn({8, 256});
  at::Tensor h = at::eye(256);
  h[3][3] = NAN;
  auto r = GptqQuantizeGgml(w, h, GgmlType::kQ6_K);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->rtn_fallback);
  EXPECT_NE(r->fallback_reason.find("not finite"), std::string::npos);
  // The NaN on the diagonal is no importance: the blocks are ggml's
  // reference quantization, finite.
  EXPECT_TRUE(at::isfinite(r->weight).all().item<bool>());
  std::vector<uint8_t> expected(*gguf::GgmlRowBytes(GgmlType::kQ6_K, w.numel()));
  ASSERT_TRUE(gguf::QuantizeRow(GgmlType::kQ6_K, w.contiguous().data_ptr<float>(), expected.data(),
                                w.numel())
                  .ok());
  EXPECT_TRUE(at::equal(r->weight, Decoded(GgmlType::kQ6_K, expected, 8, 256)));
}

}  // namespace
}  // namespace quantd::algo
