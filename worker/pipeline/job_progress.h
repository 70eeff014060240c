// JobProgress: turns (stage, fraction of the stage) into the whole-job
// percent a JobObserver is shown, over the stages the job runs, each
// weighted by its usual share of a job's time. Torch-free.
#ifndef QUANTD_WORKER_PIPELINE_JOB_PROGRESS_H_
#define QUANTD_WORKER_PIPELINE_JOB_PROGRESS_H_

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "worker/pipeline/job_observer.h"

namespace quantd::pipeline {

// Share of the whole job each stage represents, for the percent shown.
inline double StageWeight(Stage s) {
  switch (s) {
    case Stage::kLoad:
      return 2;
    case Stage::kCalibrate:
      return 10;
    case Stage::kAlgorithms:
      return 20;
    case Stage::kTrain:
      return 40;
    case Stage::kQuantize:
      return 12;
    case Stage::kEvaluate:
      return 16;
    case Stage::kExport:
      return 3;
  }
  return 1;
}

class JobProgress {
 public:
  JobProgress(JobObserver& obs, std::vector<Stage> stages) : obs_(obs), stages_(std::move(stages)) {
    for (Stage s : stages_) total_ += StageWeight(s);
  }
  // `fraction` of `stage` is done (clamped to [0, 1]); `block` of
  // `block_count` inside block loops.
  void Report(Stage stage, double fraction, int block = 0, int block_count = 0,
              const std::string& message = "",
              std::optional<TrainingStepInfo> training = std::nullopt) {
    double before = 0;
    for (Stage s : stages_) {
      if (s == stage) break;
      before += StageWeight(s);
    }
    ProgressInfo p;
    p.stage = stage;
    p.block = block;
    p.block_count = block_count;
    p.percent = 100.0 * (before + StageWeight(stage) * std::clamp(fraction, 0.0, 1.0)) / total_;
    p.message = message;
    p.training = training;
    obs_.OnProgress(p);
  }

 private:
  JobObserver& obs_;
  std::vector<Stage> stages_;
  double total_ = 0;
};

}  // namespace quantd::pipeline

#endif  // QUANTD_WORKER_PIPELINE_JOB_PROGRESS_H_
