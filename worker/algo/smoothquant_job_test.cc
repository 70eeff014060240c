// SmoothQuant on stories260K at W8A8 with static per-tensor int8 inputs:
// perplexity with weights and linear inputs fake-quantized (act_quant_eval.h)
// improves over no smoothing, for SmoothQuant (α = 0.5) and AutoSmoothQuant.
#include <cstdio>
#include <memory>

#include "gtest/gtest.h"
#include "worker/algo/smoothquant.h"
#include "worker/algo/testing/act_quant_eval.h"
#include "worker/algo/testing/stories_job.h"

namespace quantd::algo {
namespace {

using testing::ActQuantEvalOptions;
using testing::ActQuantPerplexity;

quant::QuantSpec Int8StaticPerTensor() {
  quant::QuantSpec s;
  s.dtype = quant::DataType::kInt8;
  s.qscheme = quant::QScheme::kPerTensor;
  return s;
}

TEST(SmoothQuantJobTest, W8A8StaticBeatsNoSmoothing) {
  ActQuantEvalOptions o;
  o.num_samples = 16;
  o.planner = testing::BlockLinears(testing::IntWeight(quant::DataType::kInt8, true),
                                    Int8StaticPerTensor());
  o.quantize = false;
  auto fl = ActQuantPerplexity(o);
  ASSERT_TRUE(fl.ok()) << fl.status();
  o.quantize = true;
  auto plain = ActQuantPerplexity(o);
  ASSERT_TRUE(plain.ok()) << plain.status();
  o.algorithms = {std::make_shared<SmoothQuantAlgorithm>()};
  auto sq = ActQuantPerplexity(o);
  ASSERT_TRUE(sq.ok()) << sq.status();
  AutoSmoothQuantOptions ao;
  ao.max_search_samples = 8;
  o.algorithms = {std::make_shared<AutoSmoothQuantAlgorithm>(ao)};
  auto asq = ActQuantPerplexity(o);
  ASSERT_TRUE(asq.ok()) << asq.status();
  std::printf(
      "W8A8 static: float %.4f  no smoothing %.4f  smoothquant %.4f  autosmoothquant %.4f\n",
      fl->ppl, plain->ppl, sq->ppl, asq->ppl);
  EXPECT_GT(plain->ppl, fl->ppl);
  EXPECT_LT(sq->ppl, plain->ppl);
  EXPECT_LT(asq->ppl, plain->ppl);
  int chosen = 0;
  for (const auto& m : asq->infos) chosen += m.rfind("AutoSmoothQuant ", 0) == 0;
  EXPECT_EQ(chosen, 5 * 3);
}

}  // namespace
}  // namespace quantd::algo
