#include "worker/pipeline/job_spec_check.h"

#include <string>
#include <vector>

namespace quantd::pipeline {
namespace {

using quantd::v1::ExportFormat;
using quantd::v1::JobSpec;

bool StartsWith(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

// The weight-only round-to-nearest presets the engine runs today.
const std::vector<std::string>& SupportedSchemes() {
  static const std::vector<std::string> kSchemes = {
      "w_int8_per_tensor_sym",    "w_int8_per_channel_sym", "w_int4_per_channel_sym",
      "w_uint4_per_channel_asym", "w_int4_per_group_sym",   "w_uint4_per_group_asym",
  };
  return kSchemes;
}

std::string JoinSchemes() {
  std::string out;
  for (const auto& s : SupportedSchemes()) out += (out.empty() ? "" : ", ") + s;
  return out;
}

bool IsSupportedScheme(const std::string& name) {
  for (const auto& s : SupportedSchemes())
    if (s == name) return true;
  return false;
}

bool ValidDevice(const std::string& d) {
  if (d.empty() || d == "cpu" || d == "cuda") return true;
  if (!StartsWith(d, "cuda:") || d.size() == 5) return false;
  for (size_t i = 5; i < d.size(); ++i)
    if (d[i] < '0' || d[i] > '9') return false;
  return true;
}

// Collects violations (INVALID_ARGUMENT) and the first unsupported feature
// (UNIMPLEMENTED); a malformed request is reported before a missing feature
// so the caller sees every mistake at once.
class SpecChecker {
 public:
  void Bad(const std::string& field, const std::string& why) { bad_.AddViolation(field, why); }
  void NotBuilt(const std::string& field, const std::string& why) {
    if (unimplemented_.ok())
      unimplemented_ = Status(StatusCode::kUnimplemented, field + ": " + why, "FEATURE_NOT_BUILT");
  }
  Status Result() const {
    const auto& v = bad_.violations();
    if (v.empty()) return unimplemented_;
    std::string msg = "invalid job spec: " + v[0].field + ": " + v[0].description;
    if (v.size() > 1) msg += " (and " + std::to_string(v.size() - 1) + " more)";
    Status s(StatusCode::kInvalidArgument, msg, "INVALID_JOB_SPEC");
    for (const auto& f : v) s.AddViolation(f.field, f.description);
    return s;
  }

 private:
  Status bad_{StatusCode::kInvalidArgument, ""};
  Status unimplemented_;
};

void CheckUri(SpecChecker& c, const std::string& field, const std::string& uri, bool required) {
  if (uri.empty()) {
    if (required) c.Bad(field, "is required (a file:// URI)");
    return;
  }
  if (StartsWith(uri, "file://")) {
    if (uri.size() <= 7 || uri[7] != '/')
      c.Bad(field, "file:// URIs need an absolute path, e.g. file:///models/llama");
    return;
  }
  const auto colon = uri.find("://");
  if (colon == std::string::npos) {
    c.Bad(field, "'" + uri + "' is not a URI; use file:///absolute/path");
    return;
  }
  const std::string scheme = uri.substr(0, colon);
  if (scheme == "hf" || scheme == "http" || scheme == "https") {
    c.NotBuilt(field, scheme + ":// URIs are not supported yet; use file://");
    return;
  }
  c.Bad(field, "unsupported URI scheme '" + scheme + "'; use file://");
}

void CheckQuantization(SpecChecker& c, const JobSpec& spec) {
  const auto& q = spec.quantization();
  switch (q.source_case()) {
    case quantd::v1::QuantizationSettings::kScheme:
      if (!IsSupportedScheme(q.scheme()))
        c.Bad("spec.quantization.scheme",
              "unknown scheme '" + q.scheme() + "'; supported: " + JoinSchemes());
      break;
    case quantd::v1::QuantizationSettings::kConfig:
      c.NotBuilt("spec.quantization.config",
                 "structured quantization configs are not supported yet; use a scheme");
      break;
    case quantd::v1::QuantizationSettings::kQuarkJson:
      c.NotBuilt("spec.quantization.quark_json",
                 "reference-toolkit JSON configs are not supported yet; use a scheme");
      break;
    case quantd::v1::QuantizationSettings::SOURCE_NOT_SET:
      c.Bad("spec.quantization", "set one of scheme, config or quark_json");
      break;
  }
  if (q.has_group_size() && q.group_size() <= 0)
    c.Bad("spec.quantization.group_size",
          "must be positive, got " + std::to_string(q.group_size()));
  if (q.algorithms_size() > 0)
    c.NotBuilt("spec.quantization.algorithms", "quantization algorithms are not supported yet");
  for (int i = 0; i < q.exclude_size(); ++i)
    if (q.exclude(i).empty())
      c.Bad("spec.quantization.exclude[" + std::to_string(i) + "]", "must not be empty");
}

void CheckCalibration(SpecChecker& c, const JobSpec& spec) {
  if (spec.quantization().fp8_kv_cache() && spec.calibration().dataset_uri().empty())
    c.Bad("spec.calibration.dataset_uri",
          "the FP8 KV cache is calibrated: set a calibration dataset");
  if (!spec.has_calibration()) return;
  const auto& cal = spec.calibration();
  CheckUri(c, "spec.calibration.dataset_uri", cal.dataset_uri(), false);
  if (cal.has_num_samples() && cal.num_samples() <= 0)
    c.Bad("spec.calibration.num_samples", "must be positive");
  if (cal.has_seq_len() && cal.seq_len() < 2)
    c.Bad("spec.calibration.seq_len", "must be at least 2");
}

void CheckEvaluation(SpecChecker& c, const JobSpec& spec) {
  if (!spec.has_evaluation()) return;
  const auto& ev = spec.evaluation();
  if (ev.disabled()) return;
  CheckUri(c, "spec.evaluation.dataset_uri", ev.dataset_uri(), false);
  if (ev.has_n_ctx() && (ev.n_ctx() < 2 || ev.n_ctx() > 1 << 20))
    c.Bad("spec.evaluation.n_ctx", "must be in [2, 1048576], got " + std::to_string(ev.n_ctx()));
  if (ev.max_windows() < 0) c.Bad("spec.evaluation.max_windows", "must not be negative");
  if (ev.has_max_perplexity_increase() && !(ev.max_perplexity_increase() >= 0))
    c.Bad("spec.evaluation.max_perplexity_increase", "must be a non-negative fraction (0.02 = 2%)");
  if (ev.has_max_kl_divergence() && !(ev.max_kl_divergence() >= 0))
    c.Bad("spec.evaluation.max_kl_divergence", "must not be negative");
  if ((ev.has_max_perplexity_increase() || ev.has_max_kl_divergence()) && ev.dataset_uri().empty())
    c.Bad("spec.evaluation.dataset_uri", "the accuracy gate needs an evaluation dataset");
}

void CheckExport(SpecChecker& c, const JobSpec& spec) {
  const auto& ex = spec.export_();
  for (int i = 0; i < ex.formats_size(); ++i) {
    const std::string field = "spec.export.formats[" + std::to_string(i) + "]";
    switch (ex.formats(i)) {
      case quantd::v1::HF_FAKE_QUANTIZED:
        break;
      case quantd::v1::HF_QUARK:
      case quantd::v1::GGUF:
      case quantd::v1::ONNX_QDQ:
        c.NotBuilt(field, ExportFormat_Name(ex.formats(i)) + " export is not supported yet");
        break;
      default:
        c.Bad(field, "unknown export format " + std::to_string(ex.formats(i)));
    }
  }
  if (!ex.output_uri().empty()) CheckUri(c, "spec.export.output_uri", ex.output_uri(), false);
}

}  // namespace

Status CheckJobSpec(const JobSpec& spec) {
  SpecChecker c;
  CheckUri(c, "spec.model_uri", spec.model_uri(), true);
  CheckQuantization(c, spec);
  CheckCalibration(c, spec);
  CheckEvaluation(c, spec);
  CheckExport(c, spec);
  if (!ValidDevice(spec.device()))
    c.Bad("spec.device", "'" + spec.device() + "' is not one of cpu, cuda, cuda:N");
  if (spec.has_max_attempts() && (spec.max_attempts() < 1 || spec.max_attempts() > 100))
    c.Bad("spec.max_attempts", "must be in [1, 100]");
  return c.Result();
}

}  // namespace quantd::pipeline
