#include "worker/algo/algorithm_plan.h"

#include "gtest/gtest.h"

namespace quantd::algo {
namespace {

using config::AlgorithmConfig;
using config::AutoSmoothQuantOptions;
using config::AwqOptions;
using config::GptqOptions;
using config::RotationOptions;
using config::SmoothQuantOptions;

std::vector<std::string> Fields(const Status& s) {
  std::vector<std::string> f;
  for (const auto& v : s.violations()) f.push_back(v.field);
  return f;
}

TEST(AlgorithmPlanTest, PassesOptionsAndOrdersTheSet) {
  GptqOptions gptq;
  gptq.damp_percent = 0.05;
  gptq.block_size = 64;
  gptq.act_order = true;
  gptq.static_groups = true;
  RotationOptions rotation;
  rotation.seed = 42;
  rotation.online_down_proj = true;
  AwqOptions awq;
  awq.grid = 10;
  awq.clip = false;
  awq.clip_max_tokens = 256;
  SmoothQuantOptions smooth;
  smooth.alpha = 0.7;
  smooth.alpha_overrides = {{"*.down_proj", 0.9}};
  auto p = PlanAlgorithms({{gptq}, {rotation}, {awq}, {smooth}});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_TRUE(p->rotation.has_value());
  const auto& r = std::get<RotationOptions>(p->rotation->options);
  EXPECT_EQ(r.seed, 42u);
  EXPECT_TRUE(r.online_down_proj);
  EXPECT_TRUE(r.rotate_heads);
  // Scaling in config order, then GPTQ.
  ASSERT_EQ(p->block_algorithms.size(), 3u);
  EXPECT_EQ(p->block_algorithms[0].kind(), AlgorithmKind::kAwq);
  EXPECT_EQ(p->block_algorithms[1].kind(), AlgorithmKind::kSmoothQuant);
  EXPECT_EQ(p->block_algorithms[2].kind(), AlgorithmKind::kGptq);
  EXPECT_EQ(p->block_algorithms[2].index, 0u);
  EXPECT_EQ(std::get<GptqOptions>(p->block_algorithms[2].options), gptq);
  const auto& a = std::get<AwqOptions>(p->block_algorithms[0].options);
  EXPECT_EQ(a.grid, 10);
  EXPECT_FALSE(a.clip);
  EXPECT_EQ(a.clip_max_tokens, 256);
  EXPECT_FALSE(a.quantize_weights);  // GPTQ quantizes
  EXPECT_EQ(std::get<SmoothQuantOptions>(p->block_algorithms[1].options), smooth);
}

TEST(AlgorithmPlanTest, DefaultsAndAwqQuantizesWithoutGptq) {
  auto p = PlanAlgorithms({{AwqOptions{}}, {AutoSmoothQuantOptions{}}});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_FALSE(p->rotation.has_value());
  ASSERT_EQ(p->block_algorithms.size(), 2u);
  const auto& a = std::get<AwqOptions>(p->block_algorithms[0].options);
  EXPECT_TRUE(a.quantize_weights);  // no GPTQ: AWQ quantizes
  EXPECT_EQ(a.grid, 20);
  EXPECT_DOUBLE_EQ(std::get<AutoSmoothQuantOptions>(p->block_algorithms[1].options).alpha_step,
                   0.05);
  EXPECT_TRUE(PlanAlgorithms({})->block_algorithms.empty());
}

TEST(AlgorithmPlanTest, LayerAlphaGlobsAreTriedInGlobOrder) {
  SmoothQuantOptions smooth;
  smooth.alpha_overrides = {{"*q_proj", 0.8}, {"*.mlp.*", 0.3}};
  auto p = PlanAlgorithms({{smooth}});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(std::get<SmoothQuantOptions>(p->block_algorithms[0].options).alpha_overrides,
            (std::vector<std::pair<std::string, double>>{{"*.mlp.*", 0.3}, {"*q_proj", 0.8}}));
}

TEST(AlgorithmPlanTest, EachErrorNamesItsField) {
  struct Case {
    std::vector<AlgorithmConfig> algorithms;
    std::vector<std::string> fields;
  };
  const std::string p = "spec.quantization.algorithms";
  GptqOptions damp_one;
  damp_one.damp_percent = 1;
  AwqOptions one_grid_point;
  one_grid_point.grid = 1;
  AutoSmoothQuantOptions inverted;
  inverted.alpha_min = 0.8;
  inverted.alpha_max = 0.2;
  const std::vector<Case> cases = {
      {{{GptqOptions{}}, {GptqOptions{}}}, {p + "[1].name"}},
      {{{SmoothQuantOptions{}}, {AutoSmoothQuantOptions{}}}, {p + "[1].name"}},
      {{{damp_one}}, {p + "[0].options.damp_percent"}},
      {{{one_grid_point}}, {p + "[0].options.grid_size"}},
      {{{inverted}}, {p + "[0].options.alpha_min"}},
      // Every bad field is listed.
      {{{damp_one}, {one_grid_point}, {damp_one}},
       {p + "[0].options.damp_percent", p + "[1].options.grid_size", p + "[2].name"}},
  };
  for (const Case& c : cases) {
    Status s = PlanAlgorithms(c.algorithms).status();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.fields[0];
    EXPECT_EQ(s.reason(), "INVALID_JOB_SPEC");
    EXPECT_EQ(Fields(s), c.fields) << s.ToString();
  }
  const Status damp = PlanAlgorithms({{damp_one}}).status();
  EXPECT_EQ(damp.message(), p + "[0].options.damp_percent: must be in (0, 1), got 1.0");
  EXPECT_EQ(PlanAlgorithms({{one_grid_point}}).status().violations()[0].description,
            "must be at least 2, got 1");
  Status custom = PlanAlgorithms({{GptqOptions{}}, {GptqOptions{}}}, "algorithms").status();
  EXPECT_EQ(Fields(custom), std::vector<std::string>{"algorithms[1].name"});
}

}  // namespace
}  // namespace quantd::algo
