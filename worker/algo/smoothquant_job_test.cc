// SmoothQuant on stories260K at W8A8 with static per-tensor int8 inputs,
// through the pipeline (which quantizes the linear inputs with observers
// calibrated on the quantized path): perplexity improves over no smoothing,
// for SmoothQuant (α = 0.5) and AutoSmoothQuant.
#include <cstdio>
#include <memory>

#include "gtest/gtest.h"
#include "worker/algo/smoothquant.h"
#include "worker/algo/testing/stories_job.h"

namespace quantd::algo {
namespace {

using testing::RunStoriesJob;
using testing::StoriesJobOptions;

quant::QuantSpec Int8StaticPerTensor() {
  quant::QuantSpec s;
  s.dtype = quant::DataType::kInt8;
  s.qscheme = quant::QScheme::kPerTensor;
  return s;
}

TEST(SmoothQuantJobTest, W8A8StaticBeatsNoSmoothing) {
  StoriesJobOptions o;
  o.num_samples = 16;
  o.planner = testing::BlockLinears(testing::IntWeight(quant::DataType::kInt8, true),
                                    Int8StaticPerTensor());
  auto plain = RunStoriesJob(o);
  ASSERT_TRUE(plain.ok()) << plain.status();
  o.algorithms = {std::make_shared<SmoothQuantAlgorithm>()};
  auto sq = RunStoriesJob(o);
  ASSERT_TRUE(sq.ok()) << sq.status();
  AutoSmoothQuantOptions ao;
  ao.max_search_samples = 8;
  o.algorithms = {std::make_shared<AutoSmoothQuantAlgorithm>(ao)};
  auto asq = RunStoriesJob(o);
  ASSERT_TRUE(asq.ok()) << asq.status();
  std::printf(
      "W8A8 static: float %.4f  no smoothing %.4f  smoothquant %.4f  autosmoothquant %.4f\n",
      plain->float_ppl, plain->quant_ppl, sq->quant_ppl, asq->quant_ppl);
  EXPECT_GT(plain->quant_ppl, plain->float_ppl);
  EXPECT_LT(sq->quant_ppl, plain->quant_ppl);
  EXPECT_LT(asq->quant_ppl, plain->quant_ppl);
  // One chosen alpha per smoothed group: q/k/v, gate/up and down in each of
  // the 5 blocks (o_proj cannot fold with grouped-query attention).
  int chosen = 0;
  for (const auto& m : asq->infos) chosen += m.rfind("AutoSmoothQuant ", 0) == 0;
  EXPECT_EQ(chosen, 5 * 3);
}

}  // namespace
}  // namespace quantd::algo
