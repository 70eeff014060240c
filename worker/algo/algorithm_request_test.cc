#include "worker/algo/algorithm_request.h"

#include "gtest/gtest.h"

namespace quantd::algo {
namespace {

using Json = nlohmann::json;

std::vector<std::string> Fields(const Status& s) {
  std::vector<std::string> f;
  for (const auto& v : s.violations()) f.push_back(v.field);
  return f;
}

TEST(AlgorithmRequestTest, ParsesOptionsAndOrdersTheSet) {
  std::vector<AlgorithmRequest> req = {
      {"gptq", Json{{"damp_percent", 0.05},
                    {"desc_act", true},
                    {"static_groups", true},
                    {"block_size", 64},
                    {"true_sequential", true},
                    {"inside_layer_modules", Json::array({"self_attn.q_proj"})}}},
      {"quarot", Json{{"seed", 42}, {"online_had", true}}},
      {"awq", Json{{"grid_size", 10}, {"skip_clip_search", true}, {"clip_max_tokens", 256}}},
      {"smooth_quant", Json{{"alpha", 0.7}, {"layer_alpha", {{"*.down_proj", 0.9}}}}},
  };
  auto p = ParseAlgorithmRequests(req);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_TRUE(p->rotation.has_value());
  EXPECT_EQ(p->rotation->rotation.seed, 42u);
  EXPECT_TRUE(p->rotation->rotation.online_down_proj);
  EXPECT_TRUE(p->rotation->rotation.rotate_heads);
  // Scaling in request order, then GPTQ.
  ASSERT_EQ(p->block_algorithms.size(), 3u);
  EXPECT_EQ(p->block_algorithms[0].kind, AlgorithmKind::kAwq);
  EXPECT_EQ(p->block_algorithms[1].kind, AlgorithmKind::kSmoothQuant);
  EXPECT_EQ(p->block_algorithms[2].kind, AlgorithmKind::kGptq);
  EXPECT_EQ(p->block_algorithms[2].index, 0u);
  const GptqOptions& g = p->block_algorithms[2].gptq;
  EXPECT_DOUBLE_EQ(g.damp_percent, 0.05);
  EXPECT_EQ(g.block_size, 64);
  EXPECT_TRUE(g.act_order);
  EXPECT_TRUE(g.static_groups);
  const AwqOptions& a = p->block_algorithms[0].awq;
  EXPECT_EQ(a.grid, 10);
  EXPECT_FALSE(a.clip);
  EXPECT_EQ(a.clip_max_tokens, 256);
  EXPECT_FALSE(a.quantize_weights);  // GPTQ quantizes
  const SmoothQuantOptions& s = p->block_algorithms[1].smoothquant;
  EXPECT_DOUBLE_EQ(s.alpha, 0.7);
  ASSERT_EQ(s.alpha_overrides.size(), 1u);
  EXPECT_EQ(s.alpha_overrides[0].first, "*.down_proj");
  EXPECT_DOUBLE_EQ(s.alpha_overrides[0].second, 0.9);
}

TEST(AlgorithmRequestTest, DefaultsWithoutOptions) {
  auto p = ParseAlgorithmRequests({{"awq", Json::object()}, {"autosmoothquant", nullptr}});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_FALSE(p->rotation.has_value());
  ASSERT_EQ(p->block_algorithms.size(), 2u);
  EXPECT_TRUE(p->block_algorithms[0].awq.quantize_weights);  // no GPTQ: AWQ quantizes
  EXPECT_EQ(p->block_algorithms[0].awq.grid, 20);
  EXPECT_DOUBLE_EQ(p->block_algorithms[1].autosmoothquant.alpha_step, 0.05);
  EXPECT_TRUE(ParseAlgorithmRequests({})->block_algorithms.empty());
}

TEST(AlgorithmRequestTest, EachErrorNamesItsField) {
  struct Case {
    std::vector<AlgorithmRequest> req;
    std::vector<std::string> fields;
  };
  const std::string p = "spec.quantization.algorithms";
  const std::vector<Case> cases = {
      {{{"gptq", {}}, {"sparsegpt", {}}}, {p + "[1].name"}},
      {{{"gptq", {}}, {"gptq", {}}}, {p + "[1].name"}},
      {{{"smoothquant", {}}, {"autosmoothquant", {}}}, {p + "[1].name"}},
      {{{"gptq", Json{{"damp", 0.1}}}}, {p + "[0].options.damp"}},
      {{{"gptq", Json{{"damp_percent", 0}}}}, {p + "[0].options.damp_percent"}},
      {{{"gptq", Json{{"block_size", 0}}}}, {p + "[0].options.block_size"}},
      {{{"gptq", Json{{"block_size", 1.5}}}}, {p + "[0].options.block_size"}},
      {{{"gptq", Json{{"act_order", "yes"}}}}, {p + "[0].options.act_order"}},
      {{{"gptq", Json{{"name", "awq"}}}}, {p + "[0].options.name"}},
      {{{"awq", Json{{"grid_size", 1}}}}, {p + "[0].options.grid_size"}},
      {{{"awq", Json{{"alpha", 0.5}}}}, {p + "[0].options.alpha"}},
      {{{"smoothquant", Json{{"alpha", 1.5}}}}, {p + "[0].options.alpha"}},
      {{{"smoothquant", Json{{"layer_alpha", {{"*.o_proj", 2}}}}}},
       {p + "[0].options.layer_alpha"}},
      {{{"autosmoothquant", Json{{"alpha_step", 0}}}}, {p + "[0].options.alpha_step"}},
      {{{"autosmoothquant", Json{{"alpha_min", 0.8}, {"alpha_max", 0.2}}}},
       {p + "[0].options.alpha_min"}},
      {{{"rotation", Json{{"seed", -1}}}}, {p + "[0].options.seed"}},
      {{{"rotation", Json{{"online_hadamard", 1}}}}, {p + "[0].options.online_hadamard"}},
      {{{"rotation", Json::array()}}, {p + "[0].options"}},
      // Every bad field is listed.
      {{{"gptq", Json{{"damp_percent", 2}, {"bogus", 1}}}, {"x", {}}},
       {p + "[0].options.bogus", p + "[0].options.damp_percent", p + "[1].name"}},
  };
  for (const Case& c : cases) {
    Status s = CheckAlgorithmRequests(c.req);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.fields[0];
    EXPECT_EQ(s.reason(), "INVALID_JOB_SPEC");
    EXPECT_EQ(Fields(s), c.fields) << s.ToString();
  }
  Status custom = CheckAlgorithmRequests({{"nope", {}}}, "algorithms");
  EXPECT_EQ(Fields(custom), std::vector<std::string>{"algorithms[0].name"});
  EXPECT_EQ(CheckAlgorithmRequests({{"gptq", Json{{"true_sequential", false}}}}).code(),
            StatusCode::kUnimplemented);
}

TEST(AlgorithmRequestTest, FromEngineConfig) {
  config::AlgorithmConfig g;
  g.kind = config::AlgorithmConfig::Kind::kGptq;
  g.damp_percent = 0.02;
  g.act_order = true;
  config::AlgorithmConfig s;
  s.kind = config::AlgorithmConfig::Kind::kSmoothQuant;
  s.layer_alpha = {{"*.down_proj", 0.8}};
  config::AlgorithmConfig r;
  r.kind = config::AlgorithmConfig::Kind::kRotation;
  r.seed = 7;
  r.online_hadamard = true;
  config::AlgorithmConfig a;
  a.kind = config::AlgorithmConfig::Kind::kAutoSmoothQuant;
  auto req = ToAlgorithmRequests({g, s, r});
  ASSERT_EQ(req.size(), 3u);
  EXPECT_EQ(req[0].name, "gptq");
  EXPECT_EQ(req[0].options, (Json{{"damp_percent", 0.02}, {"act_order", true}}));
  EXPECT_EQ(req[1].options, (Json{{"layer_alpha", {{"*.down_proj", 0.8}}}}));
  EXPECT_EQ(req[2].options, (Json{{"seed", 7}, {"online_hadamard", true}}));
  EXPECT_EQ(ToAlgorithmRequest(a).name, "autosmoothquant");
  EXPECT_TRUE(ToAlgorithmRequest(a).options.empty());
  auto parsed = ParseAlgorithmRequests(req);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->rotation->rotation.seed, 7u);
  EXPECT_DOUBLE_EQ(parsed->block_algorithms[0].smoothquant.alpha_overrides[0].second, 0.8);
  EXPECT_DOUBLE_EQ(parsed->block_algorithms[1].gptq.damp_percent, 0.02);
}

}  // namespace
}  // namespace quantd::algo
