#include "worker/algo/registry.h"

#include "gtest/gtest.h"
#include "worker/algo/awq.h"
#include "worker/algo/gptq.h"
#include "worker/algo/rotation.h"
#include "worker/algo/smoothquant.h"

namespace quantd::algo {
namespace {

const pipeline::LayerPlanner kPlanner = [](const std::string&, const std::string&) {
  return pipeline::LayerPlan{};
};

TEST(RegistryTest, BuildsEveryAlgorithmInOrder) {
  GptqOptions gptq;
  gptq.damp_percent = 0.03;
  gptq.act_order = true;
  RotationOptions rotation;
  rotation.seed = 9;
  rotation.online_down_proj = true;
  SmoothQuantOptions smooth;
  smooth.alpha = 0.6;
  auto set = MakeAlgorithms({{gptq}, {rotation}, {smooth}}, kPlanner);
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  ASSERT_EQ(set->block_algorithms.size(), 2u);
  auto* sq = dynamic_cast<SmoothQuantAlgorithm*>(set->block_algorithms[0].get());
  ASSERT_NE(sq, nullptr);
  EXPECT_DOUBLE_EQ(sq->options().alpha, 0.6);
  auto* g = dynamic_cast<GptqAlgorithm*>(set->block_algorithms[1].get());
  ASSERT_NE(g, nullptr);
  EXPECT_DOUBLE_EQ(g->options().damp_percent, 0.03);
  EXPECT_TRUE(g->options().act_order);
  auto* rot = dynamic_cast<RotationTransform*>(set->model_transform.get());
  ASSERT_NE(rot, nullptr);
  EXPECT_EQ(rot->options().seed, 9u);
  EXPECT_TRUE(rot->options().online_down_proj);
  EXPECT_STREQ(set->model_transform->name(), "rotation");

  auto more = MakeAlgorithms({{AwqOptions{}}, {GptqOptions{}}}, kPlanner);
  ASSERT_TRUE(more.ok());
  auto* awq = dynamic_cast<AwqAlgorithm*>(more->block_algorithms[0].get());
  ASSERT_NE(awq, nullptr);
  EXPECT_FALSE(awq->options().quantize_weights);
  EXPECT_EQ(more->model_transform, nullptr);

  AutoSmoothQuantOptions auto_smooth;
  auto_smooth.alpha_step = 0.1;
  auto asq = MakeAlgorithms({{auto_smooth}}, kPlanner);
  ASSERT_TRUE(asq.ok());
  auto* a = dynamic_cast<AutoSmoothQuantAlgorithm*>(asq->block_algorithms[0].get());
  ASSERT_NE(a, nullptr);
  EXPECT_DOUBLE_EQ(a->options().alpha_step, 0.1);
}

TEST(RegistryTest, RefusesWhatThePlanRefuses) {
  GptqOptions gptq;
  gptq.damp_percent = 1;
  auto bad = MakeAlgorithms({{gptq}}, kPlanner);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  ASSERT_EQ(bad.status().violations().size(), 1u);
  EXPECT_EQ(bad.status().violations()[0].field,
            "spec.quantization.algorithms[0].options.damp_percent");
  EXPECT_EQ(MakeAlgorithms({{SmoothQuantOptions{}}, {AutoSmoothQuantOptions{}}}, kPlanner)
                .status()
                .code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace quantd::algo
