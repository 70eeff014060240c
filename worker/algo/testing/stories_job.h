// Test support: runs a quantization job on the bundled stories260K model
// through RunQuantizationJob and reports its perplexities, so the algorithm
// tests compare RTN and an algorithm on the same protocol:
//   evaluation: the first eval_windows windows of
//     tests/data/tinystories-sample.txt (20 x 256 tokens: its first ~20 KB);
//   calibration: by default random windows of the same file's text after
//     its first 60 KB (TinyStoriesCalibrationText), so the calibration text
//     is in the model's domain but distinct from the evaluation text.
// Paths are relative to the test's runfiles directory (the tests list
// //models/stories260K and //tests/data files in `data`).
#ifndef QUANTD_WORKER_ALGO_TESTING_STORIES_JOB_H_
#define QUANTD_WORKER_ALGO_TESTING_STORIES_JOB_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "worker/common/status.h"
#include "worker/pipeline/block_algorithm.h"
#include "worker/pipeline/job_options.h"
#include "worker/pipeline/layer_plan.h"
#include "worker/quant/spec.h"

namespace quantd::algo::testing {

inline constexpr char kStoriesDir[] = "models/stories260K";
inline constexpr char kEvalText[] = "tests/data/tinystories-sample.txt";
inline constexpr char kC4[] = "tests/data/c4-sample.jsonl";
inline constexpr char kWikitext[] = "tests/data/wikitext2-validation.jsonl";
inline constexpr char kShakespeare[] = "tests/data/tinyshakespeare.txt";

struct StoriesJobOptions {
  pipeline::LayerPlanner planner;
  std::vector<std::shared_ptr<pipeline::BlockAlgorithm>> algorithms;
  std::shared_ptr<pipeline::ModelTransform> transform;
  // Empty: TinyStoriesCalibrationText().
  std::string calibration_path;
  int num_samples = 32;
  int seq_len = 256;
  uint64_t seed = 7;
  // Set: the job's calibration settings instead of the random windows above
  // (its dataset_path, when empty, is the one above).
  std::optional<pipeline::CalibrationOptions> calibration;
  int eval_windows = 20;
  int n_ctx = 256;
  // The job's scratch directory (quantized blocks) is left in place for the
  // caller to read; otherwise it is removed.
  bool keep_scratch = false;
};

struct StoriesJobResult {
  pipeline::JobReport report;
  double float_ppl = 0;
  double quant_ppl = 0;
  std::vector<std::string> warnings;
  std::vector<std::string> infos;
  std::string scratch_dir;
};

StatusOr<StoriesJobResult> RunStoriesJob(const StoriesJobOptions& options);

// A file (written once per process under TEST_TMPDIR) holding the text of
// tests/data/tinystories-sample.txt after its first 60 KB.
StatusOr<std::string> TinyStoriesCalibrationText();

// A planner giving every decoder-block linear accepted by `filter` (all when
// empty) `weight` (and `input` when set); lm_head and the rest stay float.
pipeline::LayerPlanner BlockLinears(const quant::QuantSpec& weight,
                                    std::optional<quant::QuantSpec> input = std::nullopt,
                                    std::function<bool(const std::string& name)> filter = nullptr);

quant::QuantSpec IntWeight(quant::DataType dtype, bool symmetric, int group = 0);

// (quantized - float) of `b` over that of `a`: how much of a's perplexity
// increase remains with b.
inline double IncreaseRatio(const StoriesJobResult& a, const StoriesJobResult& b) {
  return (b.quant_ppl - b.float_ppl) / (a.quant_ppl - a.float_ppl);
}

}  // namespace quantd::algo::testing

#endif  // QUANTD_WORKER_ALGO_TESTING_STORIES_JOB_H_
