// Calibration sampling decides what GPTQ gains. GPTQ at W4 per-channel
// (int4 asymmetric, as //worker/algo:gptq_w4_test) on stories260K,
// calibrated with the job's default calibration settings (sampling, seed,
// 128 samples x 512 tokens) on the bundled TinyStories text after its first
// 60 KB and evaluated on the first 100 windows of the same file (held-out
// text), must remove at least 15% of round-to-nearest's perplexity increase.
// Measured: random windows (the default) remove 36.1% (seed 0), concat
// 34.7%; the DISABLED_ case prints the comparison recorded in
// docs/algorithms.md ("Calibration sampling").
#include <cstdio>
#include <memory>

#include "gtest/gtest.h"
#include "worker/algo/gptq.h"
#include "worker/algo/testing/stories_job.h"

namespace quantd::algo {
namespace {

using testing::BlockLinears;
using testing::IncreaseRatio;
using testing::IntWeight;
using testing::RunStoriesJob;
using testing::StoriesJobOptions;
using testing::StoriesJobResult;

// 100 windows of 256 tokens: the first ~50 KB of the file, all before the
// calibration text.
constexpr int kEvalWindows = 100;

StoriesJobResult RunW4(bool gptq, const pipeline::CalibrationOptions& calibration) {
  StoriesJobOptions o;
  o.planner = BlockLinears(IntWeight(quant::DataType::kInt4, /*symmetric=*/false));
  if (gptq) o.algorithms.push_back(std::make_shared<GptqAlgorithm>(GptqOptions()));
  o.calibration = calibration;
  o.eval_windows = kEvalWindows;
  auto r = RunStoriesJob(o);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : StoriesJobResult();
}

TEST(CalibrationSamplingTest, GptqWithTheDefaultsRemovesAtLeast15PercentOfRtnsIncrease) {
  const pipeline::CalibrationOptions defaults;
  const StoriesJobResult rtn = RunW4(false, defaults);
  const StoriesJobResult gptq = RunW4(true, defaults);
  std::printf(
      "W4 per-channel asym, default calibration: float %.4f rtn %.4f gptq %.4f ratio %.3f\n",
      rtn.float_ppl, rtn.quant_ppl, gptq.quant_ppl, IncreaseRatio(rtn, gptq));
  ASSERT_GT(rtn.quant_ppl, rtn.float_ppl);
  // The bound; measured 0.639 (seeds 0, 1, 2 of random windows:
  // 0.639, 0.625, 0.644; concat 0.653), so the bound holds with a margin of
  // 0.2 whichever seed or sampling.
  EXPECT_LE(IncreaseRatio(rtn, gptq), 0.85);
  // The job used the default: random windows, seed 0.
  bool logged = false;
  for (const auto& line : gptq.infos)
    logged |= line.find("calibration: random_windows: 128 samples x 512 tokens") == 0 &&
              line.find("(seed 0)") != std::string::npos;
  EXPECT_TRUE(logged) << "no 'calibration: random_windows ...' line in the job log";
}

TEST(CalibrationSamplingTest, DISABLED_CompareSamplings) {
  const StoriesJobResult rtn = RunW4(false, pipeline::CalibrationOptions());
  std::printf("W4 per-channel asym: float %.4f rtn %.4f\n", rtn.float_ppl, rtn.quant_ppl);
  struct Setting {
    io::SamplingMethod method;
    uint64_t seed;
  };
  for (const Setting& s :
       {Setting{io::SamplingMethod::kConcat, 0}, Setting{io::SamplingMethod::kRandomWindows, 0},
        Setting{io::SamplingMethod::kRandomWindows, 1},
        Setting{io::SamplingMethod::kRandomWindows, 2}}) {
    pipeline::CalibrationOptions c;
    c.sampling = s.method;
    c.seed = s.seed;
    const StoriesJobResult g = RunW4(true, c);
    std::printf("  %-14s seed %d: gptq %.4f ratio %.3f removes %.1f%%\n",
                io::SamplingMethodName(s.method), static_cast<int>(s.seed), g.quant_ppl,
                IncreaseRatio(rtn, g), 100 * (1 - IncreaseRatio(rtn, g)));
    std::fflush(stdout);
  }
}

}  // namespace
}  // namespace quantd::algo
