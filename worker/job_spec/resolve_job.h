// ResolveJob: the one road from a quantd.v1.JobSpec to the engine. It
// validates every field of the spec (job_spec_check.h: all violations at
// once, with their job-spec paths) and, for a spec that passes, returns one
// engine-facing value: the resolved quantization (planner, reference JSON,
// description), the calibration, evaluation and export settings as engine
// types, and the warnings for the job's events.
//
// quantd runs it at CreateJob (CheckJobSpec below) and the worker once per
// job before it builds pipeline::JobOptions from the result, so both give
// the same answer by construction. Torch-free; URIs stay URIs here: the
// worker resolves them against its own roots.
#ifndef QUANTD_WORKER_JOB_SPEC_RESOLVE_JOB_H_
#define QUANTD_WORKER_JOB_SPEC_RESOLVE_JOB_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "quantd/v1/job.pb.h"
#include "worker/common/status.h"
#include "worker/export/artifact.h"
#include "worker/export/gguf/gguf_recipe.h"
#include "worker/export/serving_target.h"
#include "worker/io/dataset/calibration.h"
#include "worker/io/gguf/ggml_types.h"
#include "worker/job_spec/job_spec_check.h"
#include "worker/job_spec/quantization_settings.h"

namespace quantd::job_spec {

// A field left unset (nullopt) keeps the engine's default
// (worker/pipeline/job_options.h), which is kept in one place there.
struct CalibrationSettings {
  std::string dataset_uri;  // empty: no calibration set
  std::optional<std::string> text_field;
  std::optional<int> num_samples;
  std::optional<int> seq_len;
  std::optional<io::SamplingMethod> sampling;
  uint64_t seed = 0;
  bool on_float_outputs = false;  // spec.quantization.calibrate_on_float_outputs
  bool bfloat16_compute = false;  // spec.calibration.compute_dtype COMPUTE_BFLOAT16
  std::optional<int> min_expert_tokens;
  bool keep_starved_experts_float = false;
};

struct EvaluationSettings {
  bool disabled = false;
  std::string dataset_uri;
  std::optional<std::string> text_field;
  std::optional<int> n_ctx;
  int max_windows = 0;
  std::optional<double> max_perplexity_increase;
  std::optional<double> max_kl_divergence;
  std::optional<double> max_accuracy_drop;

  // Evaluation runs when not disabled and a dataset is named.
  bool enabled() const { return !disabled && !dataset_uri.empty(); }
};

struct ExportSettings {
  // Never empty: HF fake-quantized when the spec names none (a TorchScript
  // model's job then exports torchscript).
  std::vector<exporter::ExportFormat> formats;
  bool formats_given = false;
  std::string output_uri;  // empty: the worker's default location
  bool overwrite = false;
  gguf::GgmlType gguf_float_type = gguf::GgmlType::kF32;
  exporter::ServingTarget target = exporter::ServingTarget::kAny;
  // spec.export.gguf_type: the llama.cpp recipe that quantizes the model.
  std::optional<gguf::GgufFileType> gguf_recipe;
};

struct ResolvedJob {
  std::string model_uri;
  ResolvedQuantization quantization;
  CalibrationSettings calibration;
  EvaluationSettings evaluation;
  ExportSettings export_settings;
  // What is suspicious but not an error (a glob that matches no layer, a
  // config key that takes no effect), for the job's events.
  std::vector<std::string> warnings;
};

struct ResolveJobOptions {
  // The check's time budget (job_spec_check.h); 0 or less: no limit.
  std::chrono::milliseconds budget = kDefaultSpecCheckBudget;
};

// OK with the resolved job, or the check's INVALID_ARGUMENT (reason
// INVALID_JOB_SPEC, every bad field a violation) or UNIMPLEMENTED (reason
// FEATURE_NOT_BUILT).
StatusOr<ResolvedJob> ResolveJob(const quantd::v1::JobSpec& spec,
                                 const ResolveJobOptions& options = {});

// ResolveJob's answer without the value, for quantd's CreateJob: OK or the
// same error; on OK the warnings are appended to `warnings`.
Status CheckJobSpec(const quantd::v1::JobSpec& spec);
Status CheckJobSpec(const quantd::v1::JobSpec& spec, std::vector<std::string>* warnings,
                    std::chrono::milliseconds budget = kDefaultSpecCheckBudget);

}  // namespace quantd::job_spec

#endif  // QUANTD_WORKER_JOB_SPEC_RESOLVE_JOB_H_
