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

// Issue 25: a config's scaling_layers are honoured: AWQ scales, clips and
// quantizes the named groups only, and the attention's linears get the
// pipeline's round-to-nearest exactly as without AWQ.
TEST(AwqJobTest, ScalingLayersNameTheOnlyGroupsAwqTouches) {
  StoriesJobOptions o;
  o.num_samples = kSamples;
  o.planner = W4G32DownPerChannel(quant::DataType::kUInt4);
  auto rtn = RunStoriesJob(o);
  ASSERT_TRUE(rtn.ok()) << rtn.status();
  AwqOptions mlp_only;
  mlp_only.model_decoder_layers = "model.layers";
  mlp_only.scaling_layers = {{"post_attention_layernorm", {"mlp.gate_proj", "mlp.up_proj"},
                              "mlp.gate_proj", "mlp"},
                             {"mlp.up_proj", {"mlp.down_proj"}, "mlp.down_proj", ""}};
  o.algorithms = {std::make_shared<AwqAlgorithm>(mlp_only)};
  auto awq = RunStoriesJob(o);
  ASSERT_TRUE(awq.ok()) << awq.status();
  std::vector<std::string> scaled;
  for (const auto& m : awq->infos)
    if (m.rfind("AWQ ", 0) == 0) scaled.push_back(m.substr(4, m.find(':') - 4));
  ASSERT_EQ(scaled.size(), 5u * 2);
  for (size_t i = 0; i < scaled.size(); ++i) {
    const std::string block = "model.layers." + std::to_string(i / 2) + ".";
    EXPECT_EQ(scaled[i], block + (i % 2 == 0 ? "mlp.gate_proj" : "mlp.down_proj"));
  }
  ASSERT_EQ(awq->report.blocks.size(), rtn->report.blocks.size());
  for (size_t b = 0; b < awq->report.blocks.size(); ++b) {
    const auto& a = awq->report.blocks[b].layers;
    const auto& r = rtn->report.blocks[b].layers;
    ASSERT_EQ(a.size(), r.size());
    for (size_t i = 0; i < a.size(); ++i) {
      // Weight-only SQNR: the same weights, the same codes.
      if (a[i].name.find("self_attn") != std::string::npos)
        EXPECT_EQ(a[i].weight_sqnr_db, r[i].weight_sqnr_db) << a[i].name;
    }
  }
  // A group the model cannot scale (o_proj under grouped-query attention)
  // fails the job with the entry named.
  AwqOptions o_proj;
  o_proj.scaling_layers = {{"self_attn.v_proj", {"self_attn.o_proj"}, "", ""}};
  o.algorithms = {std::make_shared<AwqAlgorithm>(o_proj)};
  auto refused = RunStoriesJob(o);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().ToString().find("awq.scaling_layers[0].prev_op"), std::string::npos)
      << refused.status();
}

}  // namespace
}  // namespace quantd::algo
