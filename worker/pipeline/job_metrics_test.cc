#include "worker/pipeline/job_metrics.h"

#include <ATen/ATen.h>

#include "gtest/gtest.h"

namespace quantd::pipeline {
namespace {

TEST(JobMetricsTest, OutputRelMseIsErrorEnergyOverReferenceEnergy) {
  const at::Tensor reference = at::tensor({1.0f, 2.0f});
  EXPECT_DOUBLE_EQ(OutputRelMse(at::tensor({1.0f, 3.0f}), reference), 1.0 / 5);
  EXPECT_DOUBLE_EQ(OutputRelMse(reference, reference), 0);
  EXPECT_DOUBLE_EQ(OutputRelMse(at::tensor({1.0f, 3.0f}), at::zeros({2})), 0)
      << "an all-zero reference";
}

JobReport Measured(double float_ppl, double quantized_ppl, double kl) {
  JobReport r;
  r.float_perplexity.emplace();
  r.float_perplexity->ppl = float_ppl;
  r.quantized_perplexity.emplace();
  r.quantized_perplexity->ppl = quantized_ppl;
  r.kl_mean = kl;
  return r;
}

TEST(JobMetricsTest, AccuracyGateNamesEveryLimitExceeded) {
  EvaluationOptions limits;
  limits.max_perplexity_increase = 0.05;
  limits.max_kl_divergence = 0.01;
  EXPECT_TRUE(AccuracyGate(limits, Measured(10, 10.4, 0.005)).ok());

  const Status ppl = AccuracyGate(limits, Measured(10, 11, 0.005));
  EXPECT_EQ(ppl.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(ppl.reason(), "ACCURACY_GATE");
  EXPECT_EQ(ppl.message(),
            "accuracy gate: perplexity rose 10.00% (10.0000 -> 11.0000), limit 5.00%");

  const Status both = AccuracyGate(limits, Measured(10, 11, 0.02));
  EXPECT_EQ(both.message(),
            "accuracy gate: perplexity rose 10.00% (10.0000 -> 11.0000), limit 5.00%; "
            "mean KL divergence 0.02000 exceeds the limit 0.01000");
}

TEST(JobMetricsTest, AccuracyGatePassesWhatWasNotMeasuredOrNotLimited) {
  EvaluationOptions limits;
  limits.max_perplexity_increase = 0.05;
  EXPECT_TRUE(AccuracyGate(limits, JobReport()).ok()) << "evaluation off";
  EXPECT_TRUE(AccuracyGate(EvaluationOptions(), Measured(10, 20, 1)).ok()) << "no limits";
}

TEST(JobMetricsTest, FrozenSizeLineAddsTheHeldSizeWhenItDiffersFromThePackedOne) {
  FreezeReport r;
  r.float_bytes = 4096;
  r.packed_bytes = 1024;
  r.frozen_bytes = 1024;
  EXPECT_EQ(FrozenSizeLine(r), "4.0 KiB as float, 1.0 KiB real-quantized (0.250x)");
  r.frozen_bytes = 2048;  // e.g. 3-bit codes held one per byte
  EXPECT_EQ(FrozenSizeLine(r),
            "4.0 KiB as float, 1.0 KiB real-quantized (0.250x), held in memory as 2.0 KiB");
}

}  // namespace
}  // namespace quantd::pipeline
