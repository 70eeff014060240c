#include "worker/pipeline/job_progress.h"

#include <vector>

#include "gtest/gtest.h"

namespace quantd::pipeline {
namespace {

class ProgressLog : public JobObserver {
 public:
  void OnProgress(const ProgressInfo& p) override { seen.push_back(p); }
  std::vector<ProgressInfo> seen;
};

TEST(JobProgressTest, PercentIsWeightedOverTheStagesTheJobRuns) {
  ProgressLog obs;
  // Weights 2 + 12 + 16 + 3 = 33.
  JobProgress progress(obs, {Stage::kLoad, Stage::kQuantize, Stage::kEvaluate, Stage::kExport});
  progress.Report(Stage::kLoad, 0);
  progress.Report(Stage::kQuantize, 0.5, 3, 5, "block 3");
  progress.Report(Stage::kEvaluate, 1);
  progress.Report(Stage::kExport, 1);
  ASSERT_EQ(obs.seen.size(), 4u);
  EXPECT_DOUBLE_EQ(obs.seen[0].percent, 0);
  EXPECT_DOUBLE_EQ(obs.seen[1].percent, 100.0 * (2 + 6) / 33);
  EXPECT_EQ(obs.seen[1].stage, Stage::kQuantize);
  EXPECT_EQ(obs.seen[1].block, 3);
  EXPECT_EQ(obs.seen[1].block_count, 5);
  EXPECT_EQ(obs.seen[1].message, "block 3");
  EXPECT_DOUBLE_EQ(obs.seen[2].percent, 100.0 * 30 / 33);
  EXPECT_DOUBLE_EQ(obs.seen[3].percent, 100);
}

TEST(JobProgressTest, FractionsOutsideTheStageAreClamped) {
  ProgressLog obs;
  // Weights 2 + 20 = 22: a job with algorithms and nothing after them.
  JobProgress progress(obs, {Stage::kLoad, Stage::kAlgorithms});
  progress.Report(Stage::kAlgorithms, -0.5);
  progress.Report(Stage::kAlgorithms, 1.5);
  ASSERT_EQ(obs.seen.size(), 2u);
  EXPECT_DOUBLE_EQ(obs.seen[0].percent, 100.0 * 2 / 22);
  EXPECT_DOUBLE_EQ(obs.seen[1].percent, 100);
}

}  // namespace
}  // namespace quantd::pipeline
