// Rotation and the combinations of algorithms, through the pipeline on
// stories260K (weights and, where planned, linear inputs quantized by the
// pipeline; perplexity on the evaluation text).
#include <cstdio>
#include <memory>

#include "gtest/gtest.h"
#include "worker/algo/gptq.h"
#include "worker/algo/rotation.h"
#include "worker/algo/smoothquant.h"
#include "worker/algo/testing/stories_job.h"

namespace quantd::algo {
namespace {

using testing::BlockLinears;
using testing::IntWeight;
using testing::RunStoriesJob;
using testing::StoriesJobOptions;

quant::QuantSpec Int8Input(bool dynamic_per_token) {
  quant::QuantSpec s;
  s.dtype = quant::DataType::kInt8;
  if (dynamic_per_token) {
    s.qscheme = quant::QScheme::kPerChannel;
    s.ch_axis = 1;
    s.is_dynamic = true;
  } else {
    s.qscheme = quant::QScheme::kPerTensor;
  }
  return s;
}

std::shared_ptr<RotationTransform> Rotate(bool r4) {
  RotationOptions o;
  o.seed = 1;
  o.online_down_proj = r4;
  return std::make_shared<RotationTransform>(o);
}

// 16 calibration samples keep each test well under a minute.
constexpr int kSamples = 16;

// W4A8 (int4 per-channel weights, static per-tensor int8 inputs): the
// rotation spreads the hidden states' outlier channels, R4 down_proj's.
TEST(RotationJobTest, ImprovesW4A8AndW8A8) {
  StoriesJobOptions o;
  o.num_samples = kSamples;
  o.planner = BlockLinears(IntWeight(quant::DataType::kInt4, true), Int8Input(false));
  auto plain = RunStoriesJob(o);
  ASSERT_TRUE(plain.ok()) << plain.status();
  o.transform = Rotate(false);
  auto rot = RunStoriesJob(o);
  ASSERT_TRUE(rot.ok()) << rot.status();
  o.transform = Rotate(true);
  auto rot4 = RunStoriesJob(o);
  ASSERT_TRUE(rot4.ok()) << rot4.status();
  std::printf("W4A8 static: float %.4f  plain %.4f  rotation %.4f  rotation+R4 %.4f\n",
              plain->float_ppl, plain->quant_ppl, rot->quant_ppl, rot4->quant_ppl);
  EXPECT_LT(rot->quant_ppl, plain->quant_ppl);
  EXPECT_LT(rot4->quant_ppl, plain->quant_ppl);
  // The pipeline's float reference is the untransformed model; the rotated
  // model's float perplexity is the same (rotation_test checks the logits).
  EXPECT_EQ(rot4->float_ppl, plain->float_ppl);

  o.planner = BlockLinears(IntWeight(quant::DataType::kInt8, true), Int8Input(false));
  o.transform = nullptr;
  auto plain8 = RunStoriesJob(o);
  ASSERT_TRUE(plain8.ok()) << plain8.status();
  o.transform = Rotate(true);
  auto rot8 = RunStoriesJob(o);
  ASSERT_TRUE(rot8.ok()) << rot8.status();
  std::printf("W8A8 static: float %.4f  plain %.4f  rotation+R4 %.4f\n", plain8->float_ppl,
              plain8->quant_ppl, rot8->quant_ppl);
  EXPECT_LT(rot8->quant_ppl, plain8->quant_ppl);
}

// Rotation first (a model transform), then GPTQ on the rotated blocks.
TEST(CombinationJobTest, RotationThenGptq) {
  StoriesJobOptions o;
  o.num_samples = kSamples;
  o.planner = BlockLinears(IntWeight(quant::DataType::kInt4, true));
  o.algorithms = {std::make_shared<GptqAlgorithm>()};
  auto gptq = RunStoriesJob(o);
  ASSERT_TRUE(gptq.ok()) << gptq.status();
  o.transform = Rotate(true);
  o.algorithms.clear();
  auto rot = RunStoriesJob(o);
  ASSERT_TRUE(rot.ok()) << rot.status();
  o.algorithms = {std::make_shared<GptqAlgorithm>()};
  auto both = RunStoriesJob(o);
  ASSERT_TRUE(both.ok()) << both.status();
  std::printf("W4 sym per-channel: float %.4f  gptq %.4f  rotation %.4f  rotation+gptq %.4f\n",
              gptq->float_ppl, gptq->quant_ppl, rot->quant_ppl, both->quant_ppl);
  // GPTQ recovers most of what the rotated round-to-nearest model loses. On
  // this 260K-parameter model the combination lands within 0.5% of GPTQ
  // alone (5.4206 vs 5.4038 measured), not below it as on larger models.
  EXPECT_LT(both->quant_ppl, rot->quant_ppl);
  EXPECT_LT(both->quant_ppl, gptq->quant_ppl * 1.005);
  EXPECT_TRUE(both->warnings.empty());
}

// SmoothQuant rescales first, then GPTQ quantizes the smoothed weights.
TEST(CombinationJobTest, SmoothQuantThenGptq) {
  StoriesJobOptions o;
  o.num_samples = kSamples;
  o.planner = BlockLinears(IntWeight(quant::DataType::kInt4, true), Int8Input(false));
  o.algorithms = {std::make_shared<SmoothQuantAlgorithm>()};
  auto sq = RunStoriesJob(o);
  ASSERT_TRUE(sq.ok()) << sq.status();
  o.algorithms.push_back(std::make_shared<GptqAlgorithm>());
  auto both = RunStoriesJob(o);
  ASSERT_TRUE(both.ok()) << both.status();
  std::printf("W4A8 static: float %.4f  smoothquant %.4f  smoothquant+gptq %.4f\n", sq->float_ppl,
              sq->quant_ppl, both->quant_ppl);
  EXPECT_LT(both->quant_ppl, sq->quant_ppl);
}

}  // namespace
}  // namespace quantd::algo
