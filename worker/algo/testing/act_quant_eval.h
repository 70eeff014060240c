// Test support: perplexity of stories260K with weights AND linear inputs
// fake-quantized (W8A8, W4A8), which the pipeline's weight-only job does not
// measure. The model goes through the same steps as in the pipeline, block
// by block: transform (rotation), block algorithms on the calibration hidden
// states, weights rounded to nearest (layers an algorithm already quantized
// are kept), online ops installed, then static input quantizers calibrated
// with the plan's observers on the calibration hidden states and installed
// as hooks (dynamic specs quantize each call). Evaluation windows and
// calibration samples follow stories_job.h.
#ifndef QUANTD_WORKER_ALGO_TESTING_ACT_QUANT_EVAL_H_
#define QUANTD_WORKER_ALGO_TESTING_ACT_QUANT_EVAL_H_

#include <memory>
#include <string>
#include <vector>

#include "worker/common/status.h"
#include "worker/pipeline/block_algorithm.h"
#include "worker/pipeline/layer_plan.h"

namespace quantd::algo::testing {

struct ActQuantEvalOptions {
  pipeline::LayerPlanner planner;
  std::vector<std::shared_ptr<pipeline::BlockAlgorithm>> algorithms;
  std::shared_ptr<pipeline::ModelTransform> transform;
  // false: the (transformed) float model, nothing quantized.
  bool quantize = true;
  // Empty: TinyStoriesCalibrationText().
  std::string calibration_path;
  int num_samples = 32;
  int seq_len = 256;
  uint64_t seed = 7;
  int eval_windows = 20;
  int n_ctx = 256;
};

struct ActQuantEvalResult {
  double ppl = 0;
  std::vector<std::string> infos;
  std::vector<std::string> warnings;
};

StatusOr<ActQuantEvalResult> ActQuantPerplexity(const ActQuantEvalOptions& options);

}  // namespace quantd::algo::testing

#endif  // QUANTD_WORKER_ALGO_TESTING_ACT_QUANT_EVAL_H_
