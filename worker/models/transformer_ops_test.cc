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

// A Llama config.json with `extra` fields, parsed as a job's would be.
ModelConfig ParsedConfig(int64_t head_dim, double theta, const std::string& extra) {
  const std::string text = R"({"architectures": ["LlamaForCausalLM"], "hidden_size": )" +
                           std::to_string(head_dim * 2) + R"(, "num_attention_heads": 2,
      "intermediate_size": 8, "num_hidden_layers": 1, "vocab_size": 8, "rope_theta": )" +
                           std::to_string(theta) + ", " + extra + "}";
  auto c = ParseModelConfig(text, "config.json");
  EXPECT_TRUE(c.ok()) << c.status().message();
  return c.ok() ? *c : ModelConfig{};
}

void ExpectGolden(const std::vector<double>& inv,
                  const std::vector<std::pair<int, double>>& golden) {
  for (const auto& [i, want] : golden) EXPECT_NEAR(inv[i] / want, 1.0, 1e-12) << i;
}

// Golden values below: the formulas of transformers' modeling_rope_utils.py
// (docs/worker.md cites the version) evaluated in float64 with numpy.
TEST(RopeTest, YarnRampsFromExtrapolationToInterpolation) {
  // Qwen3's published long-context setting: dims below 23 keep their
  // frequency, above 40 are divided by 4, and the ones between are blended.
  const ModelConfig c = ParsedConfig(128, 1e6, R"("max_position_embeddings": 40960,
      "rope_scaling": {"rope_type": "yarn", "factor": 4.0,
                       "original_max_position_embeddings": 32768})");
  ASSERT_TRUE(c.rope_scaling.has_value());
  const std::vector<double> inv = RopeInverseFrequencies(c, 16);
  ASSERT_EQ(inv.size(), 64u);
  ExpectGolden(inv, {{0, 1.0},
                     {10, 0.11547819846894583},
                     {20, 0.01333521432163324},
                     {30, 0.001064360981247002},
                     {40, 4.4456985250973074e-05},
                     {50, 5.133812566142866e-06},
                     {63, 3.102344401879299e-07}});
  EXPECT_NEAR(RopeAttentionFactor(c), 1.138629436111989, 1e-15);  // 0.1 ln 4 + 1
  // The tables carry the attention factor: cos^2 + sin^2 = factor^2.
  const RotaryTables t = MakeRotaryTables(c, 5, at::kDouble, at::kCPU);
  EXPECT_NEAR((t.cos.pow(2) + t.sin.pow(2)).max().item<double>(),
              1.138629436111989 * 1.138629436111989, 1e-13);
  // The sequence length does not matter for YaRN.
  EXPECT_EQ(RopeInverseFrequencies(c, 100000), inv);
}

TEST(RopeTest, YarnWithoutTruncationAndDeepSeekMscale) {
  const ModelConfig c = ParsedConfig(64, 10000, R"("max_position_embeddings": 4096,
      "rope_scaling": {"type": "yarn", "factor": 40, "truncate": false, "mscale": 0.707,
                       "mscale_all_dim": 1.0, "beta_fast": null})");
  ExpectGolden(RopeInverseFrequencies(c), {{0, 1.0},
                                           {5, 0.23713737056616555},
                                           {10, 0.056234132519034905},
                                           {15, 0.008446235311291834},
                                           {20, 0.0007226383418941808},
                                           {25, 1.8747355233311396e-05},
                                           {31, 3.33380358040831e-06}});
  EXPECT_NEAR(RopeAttentionFactor(c), 0.9210423553163399, 1e-15);
  const ModelConfig given = ParsedConfig(64, 10000, R"("rope_scaling": {"rope_type": "yarn",
      "factor": 40, "attention_factor": 1.5, "mscale": 0.707, "mscale_all_dim": 1.0})");
  EXPECT_EQ(RopeAttentionFactor(given), 1.5);
}

TEST(RopeTest, DynamicNtkGrowsTheBaseOnlyPastMaxPositions) {
  const ModelConfig c = ParsedConfig(64, 10000, R"("max_position_embeddings": 2048,
      "rope_scaling": {"rope_type": "dynamic", "factor": 2.0})");
  ModelConfig plain = c;
  plain.rope_scaling.reset();
  EXPECT_EQ(RopeInverseFrequencies(c, 2048), RopeInverseFrequencies(plain));
  // base' = 10000 * (2 * 4096 / 2048 - 1)^(64 / 62) = 31082.2366...
  ExpectGolden(RopeInverseFrequencies(c, 4096), {{0, 1.0},
                                                 {8, 0.07531334453008262},
                                                 {16, 0.005672099864306927},
                                                 {31, 4.445071440544414e-05}});
  EXPECT_EQ(RopeAttentionFactor(c), 1.0);
}

TEST(RopeTest, LongRopeSwitchesFactorsPastTheOriginalContext) {
  // Phi-3 style: the pretrained context at the top level, the factor and the
  // attention factor derived from it.
  const ModelConfig c = ParsedConfig(8, 10000, R"("max_position_embeddings": 131072,
      "original_max_position_embeddings": 4096,
      "rope_scaling": {"type": "longrope", "short_factor": [1.0, 1.5, 2.0, 4.0],
                       "long_factor": [1.0, 3.0, 9.0, 27.0]})");
  ModelConfig plain = c;
  plain.rope_scaling.reset();
  const std::vector<double> base = RopeInverseFrequencies(plain);
  const std::vector<double> short_inv = RopeInverseFrequencies(c, 4096);
  const std::vector<double> long_inv = RopeInverseFrequencies(c, 4097);
  const double shorts[] = {1.0, 1.5, 2.0, 4.0}, longs[] = {1.0, 3.0, 9.0, 27.0};
  for (int i = 0; i < 4; ++i) {
    EXPECT_DOUBLE_EQ(short_inv[i], base[i] / shorts[i]) << i;
    EXPECT_DOUBLE_EQ(long_inv[i], base[i] / longs[i]) << i;
  }
  // sqrt(1 + ln(131072 / 4096) / ln 4096)
  EXPECT_NEAR(RopeAttentionFactor(c), 1.1902380714238083, 1e-15);
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
