// JobObserver: how the engine reports a running job to whoever runs it (the
// worker's lease loop, or the standalone CLI's progress bar), and how it
// learns that it should stop. RunQuantizationJob installs CancelRequested()
// as the thread's CancellationScope (worker/common/cancellation.h), so every
// long loop of the engine checks it, not only the block boundaries.
#ifndef QUANTD_WORKER_PIPELINE_JOB_OBSERVER_H_
#define QUANTD_WORKER_PIPELINE_JOB_OBSERVER_H_

#include <optional>
#include <string>
#include <vector>

namespace quantd::pipeline {

enum class Stage { kLoad, kCalibrate, kAlgorithms, kTrain, kQuantize, kEvaluate, kExport };

const char* StageName(Stage stage);

// A step of quantization-aware training.
struct TrainingStepInfo {
  int step = 0;  // 1-based
  int steps = 0;
  double loss = 0;
  double learning_rate = 0;
};

struct ProgressInfo {
  Stage stage = Stage::kLoad;
  int block = 0;  // 1-based; 0 outside block loops
  int block_count = 0;
  double percent = 0;   // whole job, [0, 100]
  std::string message;  // e.g. "float perplexity"
  std::optional<TrainingStepInfo> training;
};

// What one quantized layer got and what it cost.
struct LayerReport {
  std::string name;
  std::string weight_format;  // e.g. "int4 per_group(32) sym"; "float" when excluded
  std::string input_format;
  std::string output_format;
  double weight_sqnr_db = 0;
  bool excluded = false;
  double input_min = 0;  // static activation observers only
  double input_max = 0;
  // JobOptions::sensitivity: per candidate, the block output's relative MSE
  // with this layer alone quantized as the candidate (docs/sensitivity.md).
  std::vector<double> sensitivity_relative_mse;
};

// One expert of a mixture-of-experts block.
struct ExpertReport {
  int expert = 0;  // 0-based, as in the module names
  // Calibration tokens the router sent to it (the float forward pass).
  int64_t calibration_tokens = 0;
  // Fewer than CalibrationOptions::min_expert_tokens: GPTQ left it to
  // round-to-nearest, or (keep_starved_experts_float) it stays in float.
  bool below_floor = false;
  bool kept_float = false;
};

struct BlockReport {
  int block = 0;  // 1-based
  int block_count = 0;
  std::vector<LayerReport> layers;
  // Mixture-of-experts blocks: each expert's routed tokens; empty otherwise.
  std::vector<ExpertReport> experts;
  // ||y_q - y_f||^2 / ||y_f||^2 on the calibration (or evaluation) samples;
  // unset when not measured (no calibration data).
  std::optional<double> output_rel_mse;
  // Wall time of the block (loading wait, forward passes, algorithms,
  // quantization, handing its tensors to the scratch writer), and the part
  // spent in block algorithms (GPTQ, AWQ, ...).
  double seconds = 0;
  double algorithm_seconds = 0;
  // On a GPU: the caching allocator's peaks during the block, live tensors
  // and everything held (torch_compat::DeviceAllocatorStats); 0 where it
  // reports nothing.
  int64_t device_peak_allocated_bytes = 0;
  int64_t device_peak_reserved_bytes = 0;
};

enum class LogLevel { kInfo, kWarning, kError };

class JobObserver {
 public:
  virtual ~JobObserver() = default;
  virtual void OnProgress(const ProgressInfo& progress) {}
  virtual void OnLog(LogLevel level, const std::string& message) {}
  virtual void OnBlock(const BlockReport& block) {}
  virtual bool CancelRequested() const { return false; }
};

inline const char* StageName(Stage stage) {
  switch (stage) {
    case Stage::kLoad:
      return "load";
    case Stage::kCalibrate:
      return "calibrate";
    case Stage::kAlgorithms:
      return "algorithms";
    case Stage::kTrain:
      return "train";
    case Stage::kQuantize:
      return "quantize";
    case Stage::kEvaluate:
      return "evaluate";
    case Stage::kExport:
      return "export";
  }
  return "unknown";
}

}  // namespace quantd::pipeline

#endif  // QUANTD_WORKER_PIPELINE_JOB_OBSERVER_H_
