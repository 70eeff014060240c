// What a quantization job asks of the engine (JobOptions) and what it
// reports back (JobReport). These are the engine's own types: the worker
// translates the gRPC JobSpec into them, and the standalone CLI builds them
// from its flags, so the engine never sees protobuf.
#ifndef QUANTD_WORKER_PIPELINE_JOB_OPTIONS_H_
#define QUANTD_WORKER_PIPELINE_JOB_OPTIONS_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "worker/common/status.h"
#include "worker/config/quant_config.h"
#include "worker/eval/perplexity.h"
#include "worker/export/artifact.h"
#include "worker/export/gguf/gguf_recipe.h"
#include "worker/export/serving_target.h"
#include "worker/io/dataset/calibration.h"
#include "worker/io/gguf/ggml_types.h"
#include "worker/models/model_options.h"
#include "worker/pipeline/activation_placement.h"
#include "worker/pipeline/block_algorithm.h"
#include "worker/pipeline/job_observer.h"
#include "worker/pipeline/layer_plan.h"
#include "worker/qat/qat_options.h"

namespace quantd::pipeline {

struct CalibrationOptions {
  std::string dataset_path;  // empty: no calibration set
  // A dataset of several files (an hf://datasets split): read in this order
  // instead of dataset_path (then the snapshot folder), named dataset_name.
  std::vector<std::string> dataset_files;
  std::string dataset_name;
  std::string dataset_revision;  // hf://datasets: the resolved commit
  std::string text_field = "text";
  int num_samples = 128;
  int seq_len = 512;
  // Random windows by default: GPTQ W4 per-channel on stories260K removes
  // 36% of round-to-nearest's perplexity increase with them and 35% with
  // concat (docs/algorithms.md, "Calibration sampling";
  // //worker/algo:calibration_sampling_test holds the default to >= 15%).
  io::SamplingMethod sampling = io::SamplingMethod::kRandomWindows;
  uint64_t seed = 0;  // of the random windows
  // Block i+1 sees the float outputs of block i instead of the quantized
  // ones (the reference's default is the quantized outputs).
  bool on_float_outputs = false;
  // The dtype of the matrix products of every calibration forward pass
  // (float, quantized, and the algorithms' own; models::MatmulDtypeScope).
  // Float32 is the reference numerics bit for bit; bfloat16 is how a bf16
  // checkpoint computes, several times faster on a GPU.
  at::ScalarType compute_dtype = at::kFloat;
  // Mixture-of-experts models: an expert routed fewer calibration tokens
  // than this is reported, and its weights are rounded to nearest instead
  // of fitted by GPTQ on too little data.
  int64_t min_expert_tokens = 8;
  // Such an expert stays in float (weights and activations) instead.
  bool keep_starved_experts_float = false;
};

struct EvaluationOptions {
  bool enabled = true;
  std::string dataset_path;
  std::vector<std::string> dataset_files;  // as CalibrationOptions'
  std::string dataset_name;
  std::string dataset_revision;
  std::string text_field = "text";
  int n_ctx = 256;
  int max_windows = 0;  // 0: every window
  // Windows of the evaluation text used for per-block error metrics when the
  // job has no calibration set.
  int metric_windows = 8;
  // Accuracy gate: the job fails with ACCURACY_GATE (metrics and artifacts
  // kept, artifacts marked not accepted) when the quantized perplexity
  // exceeds float * (1 + max_perplexity_increase) or the mean KL divergence
  // exceeds max_kl_divergence.
  std::optional<double> max_perplexity_increase;
  std::optional<double> max_kl_divergence;
  // Tensor-dataset models with labels: the job fails with ACCURACY_GATE when
  // top-1 accuracy falls by more than this (a fraction: 0.01 is one point).
  std::optional<double> max_accuracy_drop;
};

struct ExportOptions {
  std::vector<exporter::ExportFormat> formats = {exporter::ExportFormat::kHfFakeQuantized};
  std::string output_dir;  // one format: this directory; several: one subdirectory each
  bool overwrite = false;
  // The directory the output must stay under (walked without following
  // symlinks; empty: its deepest existing ancestor) and the job's tenant,
  // recorded with JobOptions::job_name in the output (exporter::OutputOwner).
  std::string output_root;
  std::string tenant;
  // gguf: the type of the 2-D tensors the job left in float (F32, F16, BF16).
  gguf::GgmlType gguf_float_type = gguf::GgmlType::kF32;
  // Who serves the exports (exporter::ExportOptions::target).
  exporter::ServingTarget target = exporter::ServingTarget::kAny;
  // spec.export.gguf_type: the job quantizes the model as this llama.cpp
  // recipe does (gguf_recipe_weights.h) instead of through `planner`.
  std::optional<gguf::GgufFileType> gguf_recipe;
  // The job named its formats (false: `formats` is the default, which a
  // TorchScript model replaces with its own).
  bool formats_given = false;
};

// Models other than the decoder LLMs: TorchScript modules fed from tensor
// datasets (worker/torchscript).
struct TensorModelOptions {
  // Fold each BatchNorm2d into the Conv2d before it. Unset: when the config
  // has static activation quantization, as the reference toolkit does.
  std::optional<bool> fold_batchnorm;
  // Samples per forward pass in calibration and evaluation.
  int batch_size = 32;
  // Calibration samples (spec.calibration.num_samples); unset: every sample
  // of the calibration dataset.
  std::optional<int> calibration_samples;
};

// Quantization-aware training (spec.qat; docs/qat.md).
using QatOptions = qat::QatOptions;

// A candidate of the per-layer sensitivity measurement (spec.sensitivity;
// docs/sensitivity.md): a preset and the planner of its config.
struct SensitivityCandidate {
  std::string name;
  LayerPlanner planner;
};

struct JobOptions {
  std::string model_dir;
  // Where the model came from, for messages and the resume fingerprint
  // (empty: model_dir). The worker reads a confined view of the model
  // directory (worker/io/uri/model_files.h) whose path differs per attempt.
  std::string model_source;
  // Resolved quantization config.
  LayerPlanner planner;
  // FP8 KV cache: static per-tensor spec put on the outputs of the k/v
  // projections (overriding their output spec), scales unified per block.
  std::optional<quant::QuantSpec> kv_cache;
  float min_kv_scale = 0;
  // The resolved config the planner answers from: exporters write it as the
  // reference toolkit's quantization_config.
  config::QuantConfig quant_config;
  // One line for logs, e.g. "w_int4_per_group_sym (group 32)".
  std::string quantization_description;
  CalibrationOptions calibration;
  EvaluationOptions evaluation;
  ExportOptions export_options;
  // Run on every block before its weights are rounded, in this order.
  std::vector<std::shared_ptr<BlockAlgorithm>> block_algorithms;
  // Applied to every piece of the model as it is loaded (rotation).
  std::shared_ptr<ModelTransform> model_transform;
  // Where quantized blocks are kept until export. Required.
  std::string scratch_dir;
  // When the resumable-job checkpoints are written (CheckpointPacer): one
  // that took under `checkpoint_cheap_seconds` after every block; a costlier
  // one once `checkpoint_work_per_cost` times its cost has passed.
  double checkpoint_cheap_seconds = 1.0;
  double checkpoint_work_per_cost = 10.0;
  // The job's name ("jobs/<id>"), recorded in its exports so that a later
  // attempt may replace what an earlier, lost attempt exported.
  std::string job_name;
  models::ModelOptions model_options;
  // Where the calibration activations carried between blocks live on a GPU
  // (activation_placement.h).
  ActivationOffload activation_offload = ActivationOffload::kAuto;
  TensorModelOptions tensor_model;
  std::optional<QatOptions> qat;
  // In the spec's order; empty: not measured.
  std::vector<SensitivityCandidate> sensitivity;
};

struct StageTiming {
  Stage stage;
  double seconds = 0;
};

// One group of a tensor dataset's samples (its `bucket` value).
struct BucketReport {
  int64_t bucket = 0;
  int64_t samples = 0;
  double output_sqnr_db = 0;
  double output_relative_mse = 0;
  // Mean squared error against the dataset's `target`, when it has one.
  std::optional<double> float_target_mse;
  std::optional<double> quantized_target_mse;
};

// A tensor-dataset evaluation: the quantized model's outputs against the
// float model's on the same samples.
struct TensorEvaluation {
  int64_t samples = 0;
  // Fractions in [0, 1], with the dataset's labels.
  std::optional<double> float_top1_accuracy;
  std::optional<double> quantized_top1_accuracy;
  // 10 log10(sum f^2 / sum (q - f)^2) over every output element (infinite
  // when the outputs are equal) and its inverse ratio sum (q - f)^2 / sum f^2.
  double output_sqnr_db = 0;
  double output_relative_mse = 0;
  std::optional<double> float_target_mse;
  std::optional<double> quantized_target_mse;
  std::vector<BucketReport> buckets;  // by bucket value, when the dataset has them
};

// One measured round of an auto-precision search.
struct AutoPrecisionRound {
  int round = 0;  // 1-based
  int64_t weight_bytes = 0;
  double bits_per_weight = 0;
  std::optional<double> predicted_perplexity_increase;
  std::optional<double> predicted_kl_divergence;
  double perplexity = 0;
  double perplexity_increase = 0;
  std::optional<double> kl_divergence_mean;
  bool meets_budget = false;
  bool pareto = false;
  std::vector<int> layers_per_candidate;  // in the candidates' order
  std::optional<double> cost;             // under the user's cost table
  // Classifiers (top-1 accuracy, fractions).
  std::optional<double> predicted_accuracy_drop;
  std::optional<double> top1_accuracy;
  std::optional<double> accuracy_drop;
};

// What a search measured and chose (precision::RunAutoPrecisionJob).
struct AutoPrecisionReport {
  std::vector<std::string> candidates;
  std::vector<AutoPrecisionRound> rounds;
  int chosen_round = 0;
  bool budget_met = false;
  double float_perplexity = 0;
  std::optional<double> float_top1_accuracy;                // classifiers
  std::vector<std::pair<std::string, std::string>> layers;  // layer, candidate
  bool from_cache = false;
  std::string quark_json;  // the chosen config
};

struct JobReport {
  std::optional<eval::PerplexityResult> float_perplexity;
  std::optional<eval::PerplexityResult> quantized_perplexity;
  std::optional<double> kl_mean;
  std::optional<double> kl_high;  // at kl_percentile
  double kl_percentile = 99.0;
  std::optional<double> top1_agreement;
  std::vector<BlockReport> blocks;
  int64_t float_model_bytes = 0;
  int64_t quantized_model_bytes = 0;
  // Evaluation's frozen linears: float and frozen bytes of their weights
  // (as held in memory, and at the codes' bit widths as
  // quantized_model_bytes counts them).
  int64_t frozen_linear_float_bytes = 0;
  int64_t frozen_linear_bytes = 0;
  int64_t frozen_linear_packed_bytes = 0;
  std::vector<StageTiming> stage_timings;
  std::vector<exporter::Artifact> artifacts;
  // TorchScript models (instead of the perplexity fields).
  std::optional<TensorEvaluation> tensor_evaluation;
  // Quantization-aware training, when the job ran it.
  struct Training {
    int steps = 0;
    double first_loss = 0;
    double final_loss = 0;
    int resumed_after_step = 0;
    std::string loss;  // "cross_entropy", "mse" or "distillation"
  };
  std::optional<Training> training;
  // spec.auto_precision, when the job searched.
  std::optional<AutoPrecisionReport> auto_precision;
};

struct JobOutcome {
  Status status;     // OK, or why the job failed
  JobReport report;  // whatever was measured before it ended
  bool cancelled = false;
};

}  // namespace quantd::pipeline

#endif  // QUANTD_WORKER_PIPELINE_JOB_OPTIONS_H_
