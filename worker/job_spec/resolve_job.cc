#include "worker/job_spec/resolve_job.h"

#include <utility>

#include "worker/config/presets.h"
#include "worker/job_spec/config_proto.h"
#include "worker/job_spec/export_format.h"

namespace quantd::job_spec {
namespace {

CalibrationSettings CalibrationOf(const quantd::v1::JobSpec& spec) {
  const auto& cal = spec.calibration();
  CalibrationSettings out;
  out.dataset_uri = cal.dataset_uri();
  if (!cal.text_field().empty()) out.text_field = cal.text_field();
  if (cal.has_num_samples()) out.num_samples = cal.num_samples();
  if (cal.has_seq_len()) out.seq_len = cal.seq_len();
  // SAMPLING_MODE_UNSPECIFIED keeps the engine's default.
  if (cal.sampling() == quantd::v1::CONCAT) out.sampling = io::SamplingMethod::kConcat;
  if (cal.sampling() == quantd::v1::RANDOM_WINDOWS)
    out.sampling = io::SamplingMethod::kRandomWindows;
  out.seed = cal.seed();
  out.on_float_outputs = spec.quantization().calibrate_on_float_outputs();
  out.bfloat16_compute = cal.compute_dtype() == quantd::v1::COMPUTE_BFLOAT16;
  if (cal.has_min_expert_tokens()) out.min_expert_tokens = cal.min_expert_tokens();
  out.keep_starved_experts_float = cal.keep_starved_experts_float();
  return out;
}

EvaluationSettings EvaluationOf(const quantd::v1::JobSpec& spec) {
  const auto& ev = spec.evaluation();
  EvaluationSettings out;
  out.disabled = ev.disabled();
  out.dataset_uri = ev.dataset_uri();
  if (!ev.text_field().empty()) out.text_field = ev.text_field();
  if (ev.has_n_ctx()) out.n_ctx = ev.n_ctx();
  out.max_windows = ev.max_windows();
  if (ev.has_max_perplexity_increase()) out.max_perplexity_increase = ev.max_perplexity_increase();
  if (ev.has_max_kl_divergence()) out.max_kl_divergence = ev.max_kl_divergence();
  if (ev.has_max_accuracy_drop()) out.max_accuracy_drop = ev.max_accuracy_drop();
  return out;
}

// The spec passed the check: every format and the GGUF float type are known.
ExportSettings ExportOf(const quantd::v1::JobSpec& spec) {
  const auto& ex = spec.export_();
  ExportSettings out;
  for (int f : ex.formats()) out.formats.push_back(*ExportFormatFromProto(f));
  out.formats_given = !out.formats.empty();
  if (out.formats.empty()) out.formats.push_back(exporter::ExportFormat::kHfFakeQuantized);
  out.output_uri = ex.output_uri();
  out.overwrite = ex.overwrite();
  switch (ex.gguf_float_type()) {
    case quantd::v1::GGUF_F16:
      out.gguf_float_type = gguf::GgmlType::kF16;
      break;
    case quantd::v1::GGUF_BF16:
      out.gguf_float_type = gguf::GgmlType::kBF16;
      break;
    default:  // unspecified or GGUF_F32
      out.gguf_float_type = gguf::GgmlType::kF32;
      break;
  }
  out.target = ex.target() == quantd::v1::SERVING_TARGET_VLLM ? exporter::ServingTarget::kVllm
                                                               : exporter::ServingTarget::kAny;
  if (!ex.gguf_type().empty()) out.gguf_recipe = gguf::GgufFileTypeFromName(ex.gguf_type());
  return out;
}

// An auto-precision job's settings: resolved as a scheme job's would be
// (exclude, algorithms, the FP8 KV cache), then the global config emptied:
// the search fills it layer by layer (worker/precision).
StatusOr<config::QuantConfig> ResolveAutoPrecisionBase(const quantd::v1::QuantizationSettings& s) {
  quantd::v1::QuantizationSettings with_scheme = s;
  with_scheme.set_scheme("w_int8_per_channel_sym");
  with_scheme.clear_group_size();  // each candidate is checked with it
  StatusOr<config::QuantConfig> config = config::ResolveQuantizationSettings(with_scheme);
  if (config.ok()) config->global_quant_config = {};
  return config;
}

// Each candidate of spec.auto_precision checked as the scheme of the same
// job: what it cannot do (a group size that does not divide a layer, an
// export format or serving target that cannot hold it) is a violation on
// the candidate, so the search never chooses it.
std::vector<FieldViolation> CheckAutoPrecisionCandidates(const quantd::v1::JobSpec& spec,
                                                         const ResolveJobOptions& options) {
  std::vector<FieldViolation> out;
  const auto& candidates = spec.auto_precision().candidates();
  for (int i = 0; i < candidates.size() && i < kMaxAutoPrecisionCandidates; ++i) {
    const std::string& name = candidates[i];
    if (name == kFloatCandidate || !config::PresetConfig(name).ok()) continue;
    quantd::v1::JobSpec alone = spec;
    alone.clear_auto_precision();
    alone.mutable_quantization()->set_scheme(name);
    StatusOr<ResolvedJob> resolved = ResolveJob(alone, options);
    for (const FieldViolation& v : resolved.status().violations()) {
      if (v.field.rfind("spec.quantization", 0) != 0 && v.field.rfind("spec.export", 0) != 0)
        continue;  // the job's own violation, reported once by its own check
      // A layer the group size does not divide takes the next candidate up
      // (auto_precision_job.h); other layers may still use this one.
      if (v.field == "spec.quantization.group_size" &&
          v.description.find("does not divide") != std::string::npos)
        continue;
      out.push_back({"spec.auto_precision.candidates[" + std::to_string(i) + "]",
                     name + " as the job's scheme: " + v.field + ": " + v.description});
    }
  }
  return out;
}

}  // namespace

StatusOr<ResolvedJob> ResolveJob(const quantd::v1::JobSpec& spec,
                                 const ResolveJobOptions& options) {
  // Resolved once: the check reports its violations as the spec's and, when
  // there are none, the resolved config is the one the engine runs.
  // A llama.cpp recipe (export.gguf_type) takes the place of the
  // quantization settings: the job's config then quantizes nothing itself
  // and holds only the algorithms run with the recipe (GPTQ).
  const quantd::v1::QuantizationSettings& qs = spec.quantization();
  const bool recipe_alone =
      !spec.export_().gguf_type().empty() && config::HoldsOnlyRecipeSettings(qs);
  const bool auto_precision = spec.has_auto_precision() &&
                              qs.source_case() == quantd::v1::QuantizationSettings::SOURCE_NOT_SET;
  StatusOr<config::QuantConfig> quantization = recipe_alone ? config::ResolveRecipeAlgorithms(qs)
                                               : auto_precision
                                                   ? ResolveAutoPrecisionBase(qs)
                                                   : config::ResolveQuantizationSettings(qs);
  ResolvedJob job;
  Status checked = CheckResolvedJobSpec(spec, quantization, &job.warnings, options.budget);
  if (spec.has_auto_precision()) {
    std::vector<FieldViolation> more = CheckAutoPrecisionCandidates(spec, options);
    if (!more.empty()) {
      std::vector<FieldViolation> all = checked.violations();
      all.insert(all.end(), more.begin(), more.end());
      checked = SpecViolationsStatus(all);
    }
  }
  QD_RETURN_IF_ERROR(checked);
  job.model_uri = spec.model_uri();
  job.quantization = ResolveQuantization(spec.quantization(), *std::move(quantization));
  if (auto_precision) job.quantization.description = "auto precision";
  if (recipe_alone) {
    job.quantization.description = "llama.cpp recipe " + spec.export_().gguf_type();
    for (const config::AlgorithmConfig& a : job.quantization.config.algorithms)
      job.quantization.description += ", " + std::string(config::AlgorithmKindName(a.kind()));
  }
  job.calibration = CalibrationOf(spec);
  job.evaluation = EvaluationOf(spec);
  job.export_settings = ExportOf(spec);
  return job;
}

Status CheckJobSpec(const quantd::v1::JobSpec& spec) { return ResolveJob(spec).status(); }

Status CheckJobSpec(const quantd::v1::JobSpec& spec, std::vector<std::string>* warnings,
                    std::chrono::milliseconds budget) {
  StatusOr<ResolvedJob> job = ResolveJob(spec, {budget});
  if (!job.ok()) return job.status();
  if (warnings != nullptr)
    warnings->insert(warnings->end(), job->warnings.begin(), job->warnings.end());
  return OkStatus();
}

}  // namespace quantd::job_spec
