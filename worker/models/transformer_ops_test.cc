#include "worker/models/transformer_ops.h"

#include <cmath>

#include "gtest/gtest.h"

namespace quantd::models {
namespace {

ModelConfig Llama3Rope() {
  ModelConfig c;
  c.head_dim = 128;
  c.rope_theta = 500000.0;
  RopeScaling s;
  s.type = "llama3";
  s.factor = 8.0;
  s.low_freq_factor = 1.0;
  s.high_freq_factor = 4.0;
  s.original_max_position_embeddings = 8192;
  c.rope_scaling = s;
  return c;
}

TEST(RopeTest, Llama3InverseFrequencies) {
  // Reference: the published llama3 recipe evaluated in float64 with numpy.
  const std::vector<std::pair<int, double>> golden = {
      {0, 1.0},
      {20, 0.016560440080994446},
      {30, 0.0013718935677611381},  // inside the interpolated band
      {40, 3.428102195952591e-05},
      {45, 1.2297638677963614e-05},
      {50, 4.411534674558404e-06},
      {63, 3.068925988914511e-07},
  };
  const std::vector<double> inv = RopeInverseFrequencies(Llama3Rope());
  ASSERT_EQ(inv.size(), 64u);
  for (const auto& [i, want] : golden) EXPECT_NEAR(inv[i] / want, 1.0, 1e-12) << i;

  ModelConfig plain = Llama3Rope();
  plain.rope_scaling.reset();
  EXPECT_NEAR(RopeInverseFrequencies(plain)[30] / 0.0021311195369119653, 1.0, 1e-12);
  plain.rope_scaling = RopeScaling{"linear", 4.0};
  EXPECT_NEAR(RopeInverseFrequencies(plain)[30] / (0.0021311195369119653 / 4), 1.0, 1e-12);
}

TEST(RopeTest, RotatesEachHalfPairByPositionTimesFrequency) {
  ModelConfig c;
  c.head_dim = 8;
  c.rope_theta = 10000.0;
  at::manual_seed(1);
  const at::Tensor x = at::randn({1, 2, 5, 8}, at::kDouble);
  const at::Tensor y = ApplyRotary(x, MakeRotaryTables(c, 5, at::kDouble, at::kCPU));
  const auto inv = RopeInverseFrequencies(c);
  auto xa = x.accessor<double, 4>();
  auto ya = y.accessor<double, 4>();
  for (int h = 0; h < 2; ++h) {
    for (int p = 0; p < 5; ++p) {
      for (int i = 0; i < 4; ++i) {
        const double a = p * inv[i];
        const double x1 = xa[0][h][p][i], x2 = xa[0][h][p][i + 4];
        EXPECT_NEAR(ya[0][h][p][i], x1 * std::cos(a) - x2 * std::sin(a), 1e-12);
        EXPECT_NEAR(ya[0][h][p][i + 4], x2 * std::cos(a) + x1 * std::sin(a), 1e-12);
      }
    }
  }
}

// Attention written out head by head, row by row, in float64.
at::Tensor ReferenceAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                              double scale, int64_t window) {
  const int64_t b = q.size(0), h = q.size(1), t = q.size(2), hd = q.size(3);
  const int64_t group = h / k.size(1);
  at::Tensor out = at::zeros({b, h, t, hd}, at::kDouble);
  for (int64_t n = 0; n < b; ++n) {
    for (int64_t head = 0; head < h; ++head) {
      const int64_t kv = head / group;
      for (int64_t i = 0; i < t; ++i) {
        std::vector<double> s;
        double mx = -INFINITY;
        for (int64_t j = 0; j <= i; ++j) {
          const bool visible = window == 0 || i - j < window;
          double dot = (q[n][head][i] * k[n][kv][j]).sum().item<double>() * scale;
          s.push_back(visible ? dot : -INFINITY);
          mx = std::max(mx, s.back());
        }
        double z = 0;
        for (double& e : s) z += (e = std::exp(e - mx));
        at::Tensor acc = at::zeros({hd}, at::kDouble);
        for (int64_t j = 0; j <= i; ++j) acc += v[n][kv][j] * (s[j] / z);
        out[n][head][i] = acc;
      }
    }
  }
  return out;
}

TEST(AttentionTest, GroupedQueryCausalMatchesReferenceAndTilesExactly) {
  at::manual_seed(3);
  const at::Tensor q = at::randn({2, 4, 7, 3}, at::kDouble);
  const at::Tensor k = at::randn({2, 2, 7, 3}, at::kDouble);
  const at::Tensor v = at::randn({2, 2, 7, 3}, at::kDouble);
  AttentionOptions o;
  o.scale = 0.4;
  const at::Tensor whole = CausalSelfAttention(q, k, v, o);
  EXPECT_TRUE(at::allclose(whole, ReferenceAttention(q, k, v, 0.4, 0), 1e-12, 1e-12));
  o.max_score_elements = 9;  // forces per-sample, 2-row query tiles
  EXPECT_TRUE(at::allclose(CausalSelfAttention(q, k, v, o), whole, 1e-14, 1e-14));

  o.max_score_elements = int64_t{1} << 20;
  o.sliding_window = 3;
  EXPECT_TRUE(at::allclose(CausalSelfAttention(q, k, v, o), ReferenceAttention(q, k, v, 0.4, 3),
                           1e-12, 1e-12));
}

TEST(ActivationTest, MatchesClosedForms) {
  const at::Tensor x = at::linspace(-4, 4, 33, at::kDouble);
  const at::Tensor tanh_gelu =
      0.5 * x * (1 + at::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x.pow(3))));
  EXPECT_TRUE(at::allclose(Activation(x, "gelu_new"), tanh_gelu, 1e-12, 1e-12));
  EXPECT_TRUE(at::allclose(Activation(x, "gelu_pytorch_tanh"), tanh_gelu, 1e-12, 1e-12));
  EXPECT_TRUE(at::allclose(Activation(x, "gelu"), 0.5 * x * (1 + at::erf(x / std::sqrt(2.0))),
                           1e-12, 1e-12));
  EXPECT_TRUE(at::allclose(Activation(x, "silu"), x / (1 + at::exp(-x)), 1e-12, 1e-12));
  EXPECT_TRUE(at::equal(Activation(x, "relu"), x.clamp_min(0)));
}

}  // namespace
}  // namespace quantd::models
