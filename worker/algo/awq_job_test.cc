// AWQ through the pipeline on stories260K: at W4 group 32 (down_proj, whose
// 172 inputs 32 does not divide, per-channel) AWQ beats round-to-nearest.
#include <cstdio>
#include <memory>

#include "gtest/gtest.h"
#include "worker/algo/awq.h"
#include "worker/algo/testing/stories_job.h"

namespace quantd::algo {
namespace {

using testing::IntWeight;
using testing::RunStoriesJob;
using testing::StoriesJobOptions;

pipeline::LayerPlanner W4G32DownPerChannel(quant::DataType dtype) {
  const quant::QuantSpec g32 = IntWeight(dtype, /*symmetric=*/false, 32);
  const quant::QuantSpec per_channel = IntWeight(dtype, /*symmetric=*/false);
  return [=](const std::string& name, const std::string&) {
    pipeline::LayerPlan p;
    if (name.rfind("model.layers.", 0) != 0) return p;
    p.weight = name.find("down_proj") != std::string::npos ? per_channel : g32;
    return p;
  };
}

// AWQ runs the block 20 times per scaled attention or MLP group; 16
// calibration samples keep the test short.
constexpr int kSamples = 16;

TEST(AwqJobTest, BeatsRoundToNearestAtW4Group32) {
  StoriesJobOptions o;
  o.num_samples = kSamples;
  o.planner = W4G32DownPerChannel(quant::DataType::kUInt4);
  auto rtn = RunStoriesJob(o);
  ASSERT_TRUE(rtn.ok()) << rtn.status();
  o.algorithms.push_back(std::make_shared<AwqAlgorithm>());
  auto awq = RunStoriesJob(o);
  ASSERT_TRUE(awq.ok()) << awq.status();
  std::printf("W4 g32 (down per-channel): float %.4f  rtn %.4f  awq %.4f  increase ratio %.3f\n",
              rtn->float_ppl, rtn->quant_ppl, awq->quant_ppl, testing::IncreaseRatio(*rtn, *awq));
  EXPECT_LT(awq->quant_ppl, rtn->quant_ppl);
  // AWQ reports the alpha it chose for each scaled group (q/k/v, gate/up and
  // down; o_proj cannot fold with grouped-query attention).
  int alphas = 0;
  for (const auto& m : awq->infos) alphas += m.rfind("AWQ ", 0) == 0;
  EXPECT_EQ(alphas, 5 * 3);
  for (const auto& b : awq->report.blocks)
    for (const auto& l : b.layers) {
      EXPECT_EQ(l.weight_format, l.name.find("down_proj") != std::string::npos
                                     ? "uint4 per_channel(axis 0) asym"
                                     : "uint4 per_group(32) asym");
      EXPECT_GT(l.weight_sqnr_db, 10) << l.name;
    }

  // Scales and clips only, rounding left to the pipeline: for weight groups
  // that straddle zero (all of them here) AWQ's quantizer and the spec's
  // agree, so the result is the same model.
  AwqOptions scale_only;
  scale_only.quantize_weights = false;
  o.algorithms = {std::make_shared<AwqAlgorithm>(scale_only)};
  auto scaled = RunStoriesJob(o);
  ASSERT_TRUE(scaled.ok()) << scaled.status();
  EXPECT_LT(scaled->quant_ppl, rtn->quant_ppl);
  EXPECT_NEAR(scaled->quant_ppl, awq->quant_ppl, 1e-3);
}

}  // namespace
}  // namespace quantd::algo
