#include "worker/algo/testing/stories_job.h"

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

#include "worker/pipeline/quantization_job.h"

namespace quantd::algo::testing {
namespace {

namespace fs = std::filesystem;

class CollectingObserver : public pipeline::JobObserver {
 public:
  void OnLog(pipeline::LogLevel level, const std::string& message) override {
    std::lock_guard<std::mutex> lock(mu);
    (level == pipeline::LogLevel::kInfo ? infos : warnings).push_back(message);
  }
  std::mutex mu;
  std::vector<std::string> infos;
  std::vector<std::string> warnings;
};

fs::path TempRoot() {
  const char* tmp = std::getenv("TEST_TMPDIR");
  return tmp != nullptr ? fs::path(tmp) : fs::temp_directory_path();
}

std::string NewScratchDir() {
  static std::atomic<int> counter{0};
  return (TempRoot() / ("algo_job_" + std::to_string(::getpid()) + "_" + std::to_string(counter++)))
      .string();
}

}  // namespace

StatusOr<std::string> TinyStoriesCalibrationText() {
  static std::mutex mu;
  static std::string path;
  std::lock_guard<std::mutex> lock(mu);
  if (!path.empty()) return path;
  std::ifstream in(kEvalText, std::ios::binary);
  if (!in) return NotFoundError(std::string("cannot read ") + kEvalText);
  std::stringstream text;
  text << in.rdbuf();
  constexpr size_t kEvaluated = 60000;
  if (text.str().size() <= kEvaluated) return InternalError("evaluation text too short");
  std::string out_path =
      (TempRoot() / ("tinystories-calibration-" + std::to_string(::getpid()) + ".txt")).string();
  std::ofstream out(out_path, std::ios::binary);
  out << text.str().substr(kEvaluated);
  if (!out) return InternalError("cannot write " + out_path);
  path = out_path;
  return path;
}

quant::QuantSpec IntWeight(quant::DataType dtype, bool symmetric, int group) {
  quant::QuantSpec s;
  s.dtype = dtype;
  s.symmetric = symmetric;
  if (group > 0) {
    s.qscheme = quant::QScheme::kPerGroup;
    s.group_size = group;
    s.ch_axis = -1;
  } else {
    s.qscheme = quant::QScheme::kPerChannel;
    s.ch_axis = 0;
  }
  return s;
}

pipeline::LayerPlanner BlockLinears(const quant::QuantSpec& weight,
                                    std::optional<quant::QuantSpec> input,
                                    std::function<bool(const std::string& name)> filter) {
  return [weight, input, filter](const std::string& name, const std::string&) {
    pipeline::LayerPlan p;
    if (name.rfind("model.layers.", 0) != 0) return p;
    if (filter && !filter(name)) return p;
    p.weight = weight;
    p.input = input;
    return p;
  };
}

StatusOr<StoriesJobResult> RunStoriesJob(const StoriesJobOptions& options) {
  pipeline::JobOptions o;
  o.model_dir = kStoriesDir;
  o.planner = options.planner;
  o.quantization_description = "algorithm test";
  if (options.calibration) {
    o.calibration = *options.calibration;
  } else {
    o.calibration.num_samples = options.num_samples;
    o.calibration.seq_len = options.seq_len;
    o.calibration.sampling = io::SamplingMethod::kRandomWindows;
    o.calibration.seed = options.seed;
  }
  if (o.calibration.dataset_path.empty()) {
    if (options.calibration_path.empty()) {
      QD_ASSIGN_OR_RETURN(o.calibration.dataset_path, TinyStoriesCalibrationText());
    } else {
      o.calibration.dataset_path = options.calibration_path;
    }
  }
  o.evaluation.dataset_path = kEvalText;
  o.evaluation.n_ctx = options.n_ctx;
  o.evaluation.max_windows = options.eval_windows;
  o.export_options.formats.clear();
  o.block_algorithms = options.algorithms;
  o.model_transform = options.transform;
  StoriesJobResult result;
  result.scratch_dir = NewScratchDir();
  o.scratch_dir = result.scratch_dir;
  CollectingObserver obs;
  pipeline::JobOutcome out = pipeline::RunQuantizationJob(o, obs);
  if (!options.keep_scratch) fs::remove_all(result.scratch_dir);
  if (!out.status.ok()) return out.status;
  if (!out.report.float_perplexity || !out.report.quantized_perplexity) {
    return InternalError("the job reported no perplexity");
  }
  result.report = out.report;
  result.float_ppl = out.report.float_perplexity->ppl;
  result.quant_ppl = out.report.quantized_perplexity->ppl;
  result.warnings = obs.warnings;
  result.infos = obs.infos;
  return result;
}

}  // namespace quantd::algo::testing
