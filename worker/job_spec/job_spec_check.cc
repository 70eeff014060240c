#include "worker/job_spec/job_spec_check.h"

#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "worker/algo/algorithm_plan.h"
#include "worker/algo/algorithm_support.h"
#include "worker/algo/awq_layout.h"
#include "worker/common/bounded_json.h"
#include "worker/common/deadline.h"
#include "worker/config/presets.h"
#include "worker/export/checkpoint_methods.h"
#include "worker/export/export_support.h"
#include "worker/export/gguf/gguf_recipe.h"
#include "worker/export/serving_target.h"
#include "worker/io/gguf/gguf_file.h"
#include "worker/io/gguf/hf_mapping.h"
#include "worker/io/uri/hub_dataset.h"
#include "worker/io/uri/model_files.h"
#include "worker/io/uri/uri_parser.h"
#include "worker/job_spec/config_proto.h"
#include "worker/job_spec/export_format.h"
#include "worker/job_spec/serving_check.h"
#include "worker/models/layer_shapes.h"
#include "worker/models/model_config.h"

namespace quantd::job_spec {
namespace {

using quantd::v1::JobSpec;

// spec.sensitivity.candidates: each costs a block forward per linear.
constexpr int kMaxSensitivityCandidates = 8;

bool StartsWith(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
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
}  // namespace

Status SpecViolationsStatus(const std::vector<FieldViolation>& v) {
  if (v.empty()) return OkStatus();
  // The count comes first: the first violation may end in a list of
  // allowed values, which a trailing count would seem to extend.
  std::string msg = "invalid job spec: ";
  if (v.size() > 1) msg += std::to_string(v.size()) + " violations; the first: ";
  msg += v[0].field + ": " + v[0].description;
  Status s(StatusCode::kInvalidArgument, msg, "INVALID_JOB_SPEC");
  for (const auto& f : v) s.AddViolation(f.field, f.description);
  return s;
}

namespace {

class SpecChecker {
 public:
  explicit SpecChecker(const Deadline& deadline) : deadline_(deadline) {}

  void Bad(const std::string& field, const std::string& why) { bad_.AddViolation(field, why); }
  const Deadline& deadline() const { return deadline_; }
  // Whether the budget is spent; the first time, a violation on `field`
  // (what was being checked) says so.
  bool OutOfTime(const std::string& field, const std::string& what = "") {
    if (!out_of_time_ && !deadline_.Expired()) return false;
    if (!out_of_time_) {
      out_of_time_ = true;
      Bad(field, "validation exceeded its budget of " + std::to_string(deadline_.budget_ms()) +
                     " ms" + (what.empty() ? "" : " " + what) +
                     "; use fewer or simpler layer name patterns");
    }
    return true;
  }
  void NotBuilt(const std::string& field, const std::string& why) {
    if (unimplemented_.ok())
      unimplemented_ = Status(StatusCode::kUnimplemented, field + ": " + why, "FEATURE_NOT_BUILT");
  }
  Status Result() const {
    if (bad_.violations().empty()) return unimplemented_;
    return SpecViolationsStatus(bad_.violations());
  }

 private:
  Status bad_{StatusCode::kInvalidArgument, ""};
  Status unimplemented_;
  Deadline deadline_;
  bool out_of_time_ = false;
};

// Every URI is split by the one parser (worker/io/uri/uri_parser.h) that the
// frontend's policy and the worker use, so a URI this check accepts is the
// one they check and open.
// What a URI names, which decides the schemes it may use.
enum class UriRole { kModel, kDataset, kOutput };

void CheckUri(SpecChecker& c, const std::string& field, const std::string& uri, bool required,
              UriRole role) {
  if (uri.empty()) {
    if (required) c.Bad(field, "is required (a file://, hf://, s3:// or https:// URI)");
    return;
  }
  auto parsed = io::ParseUri(uri);
  if (!parsed.ok()) {
    c.Bad(field, parsed.status().message());
    return;
  }
  const std::string& scheme = parsed->scheme;
  if (scheme == "file") return;
  switch (role) {
    case UriRole::kModel:
      if (scheme == "hf" && parsed->hub_type == "dataset") {
        c.Bad(field, "names a dataset (hf://datasets/...); a model is hf://ORG/NAME[@REV]");
      }
      // hf:// is a checkpoint directory; over http(s) only one file comes.
      if ((scheme == "http" || scheme == "https") &&
          !(parsed->path.size() > 5 &&
            parsed->path.compare(parsed->path.size() - 5, 5, ".gguf") == 0)) {
        c.Bad(field, "an " + scheme +
                         ":// model is one .gguf file; a checkpoint directory comes from hf://, "
                         "s3:// or file://");
      }
      return;
    case UriRole::kDataset:
      if (scheme == "hf" && parsed->hub_type != "dataset") {
        c.Bad(field,
              "names a model; a dataset on the Hub is hf://datasets/ORG/NAME[@REV][?split=...]");
      } else if (scheme == "hf") {
        auto query = io::ParseHubDatasetQuery(parsed->query);
        if (!query.ok()) c.Bad(field, query.status().message());
      }
      return;
    case UriRole::kOutput:
      if (scheme != "s3")
        c.NotBuilt(field, scheme + ":// outputs are not supported; use file:// or s3://");
      return;
  }
}

// An hf://datasets URI's field= and the spec's text_field must agree.
void CheckDatasetField(SpecChecker& c, const std::string& prefix, const std::string& uri,
                       const std::string& text_field) {
  if (text_field.empty()) return;
  auto parsed = io::ParseUri(uri);
  if (!parsed.ok() || parsed->hub_type != "dataset") return;
  auto query = io::ParseHubDatasetQuery(parsed->query);
  if (query.ok() && !query->field.empty() && query->field != text_field) {
    c.Bad(prefix + ".text_field",
          "is '" + text_field + "' but " + prefix + ".dataset_uri says field=" + query->field);
  }
}

// Where a config's own algorithms / layer types are spelled, per source.
std::string AlgorithmsField(const quantd::v1::QuantizationSettings& q) {
  if (q.algorithms_size() > 0) return "spec.quantization.algorithms";
  return q.source_case() == quantd::v1::QuantizationSettings::kQuarkJson
             ? "spec.quantization.quark_json.algo_config"
             : "spec.quantization.config.algorithms";
}

std::string LayerTypeField(const quantd::v1::QuantizationSettings& q, size_t i,
                           const std::string& type) {
  return q.source_case() == quantd::v1::QuantizationSettings::kQuarkJson
             ? "spec.quantization.quark_json.layer_type_quant_config." + type
             : "spec.quantization.config.layer_type_quant_config[" + std::to_string(i) + "]";
}

bool IsStaticActivation(const std::optional<quant::QuantSpec>& spec) {
  return spec && !spec->is_dynamic && !quant::IsCastType(spec->dtype);
}

bool HasStaticActivations(const config::LayerQuantConfig& c) {
  return IsStaticActivation(c.input_tensors) || IsStaticActivation(c.output_tensors);
}

// The config.json a GGUF model's metadata gives (gguf_model_dir.h), when the
// file at `path` is a regular file inside its own directory.
std::optional<std::string> ReadGgufConfigJson(const std::string& path) {
  char dir[PATH_MAX], file[PATH_MAX];
  const std::string parent = std::filesystem::path(path).parent_path().string();
  if (realpath(parent.c_str(), dir) == nullptr || realpath(path.c_str(), file) == nullptr ||
      !io::ModelFiles::MayRead(dir, file, {})) {
    return std::nullopt;
  }
  const int fd = open(file, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::optional<std::string> config;
  struct stat st;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    // The header is parsed with its limits; tensor data is never read.
    auto parsed = gguf::ReadGgufFile("/proc/self/fd/" + std::to_string(fd));
    if (parsed.ok()) {
      auto built = gguf::BuildHfConfigJson(*parsed);
      if (built.ok()) config = *std::move(built);
    }
  }
  close(fd);
  return config;
}

// The model's linear layers from <model_uri>/config.json, or from a GGUF
// file's metadata, when the checker can read it (a file:// model on this
// host, of a known architecture); nullopt otherwise: the worker then checks
// the layers when it loads the model.
std::optional<std::string> ReadModelConfigJson(const std::string& model_uri) {
  auto parsed = io::ParseUri(model_uri);
  if (!parsed.ok() || parsed->scheme != "file") return std::nullopt;
  struct stat model;
  if (stat(parsed->path.c_str(), &model) == 0 && S_ISREG(model.st_mode)) {
    return ReadGgufConfigJson(parsed->path);
  }
  // Only a config.json that stays inside the model directory (a link into
  // the same hub repository's blobs/ included): the check never reads a file
  // the model directory merely points at.
  char dir[PATH_MAX], file[PATH_MAX];
  if (realpath(parsed->path.c_str(), dir) == nullptr ||
      realpath((parsed->path + "/config.json").c_str(), file) == nullptr ||
      !io::ModelFiles::MayRead(dir, file, {})) {
    return std::nullopt;
  }
  const int fd = open(file, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  struct stat st;
  std::string text;
  // Never read whole: the parser refuses what is past its limit.
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    text.resize(std::min<size_t>(static_cast<size_t>(st.st_size), json_limits::kModelConfig + 1));
    const ssize_t n = read(fd, text.data(), text.size());
    text.resize(n > 0 ? static_cast<size_t>(n) : 0);
  }
  close(fd);
  return text;
}

// Whether the model is a local TorchScript archive (a zip file, as the
// worker's IsScriptModelPath tells them apart). Its onnx export writes
// weights ONNX has no element type for as their fake-quantized floats
// (worker/torchscript/script_onnx_export.h), so only its activation specs
// are held to onnx_qdq's rules here; a remote one is checked as any model.
bool IsLocalScriptModel(const std::string& model_uri) {
  auto parsed = io::ParseUri(model_uri);
  if (!parsed.ok() || parsed->scheme != "file") return false;
  const int fd = open(parsed->path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st;
  char magic[4] = {};
  const bool zip = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && read(fd, magic, 4) == 4 &&
                   magic[0] == 'P' && magic[1] == 'K' && magic[2] == 3 && magic[3] == 4;
  close(fd);
  return zip;
}

std::optional<models::ModelConfig> ReadModelConfig(const std::string& model_uri) {
  std::optional<std::string> text = ReadModelConfigJson(model_uri);
  if (!text) return std::nullopt;
  auto config = models::ParseModelConfig(*text, model_uri + "/config.json");
  if (!config.ok()) return std::nullopt;
  return *std::move(config);
}

std::optional<std::vector<config::LayerInfo>> ReadModelLayers(const std::string& model_uri) {
  std::optional<models::ModelConfig> model = ReadModelConfig(model_uri);
  if (!model) return std::nullopt;
  const std::vector<models::LinearLayerInfo> linears = models::ListLinearLayers(*model);
  std::vector<config::LayerInfo> layers;
  for (const auto& l : linears) layers.push_back({l.name, l.type, l.out_features, l.in_features});
  return layers;
}

// A model that is itself a quantized checkpoint must be one quantd reads.
void CheckModelCheckpoint(SpecChecker& c, const JobSpec& spec) {
  std::optional<std::string> text = ReadModelConfigJson(spec.model_uri());
  if (!text) return;
  auto cfg = ParseBoundedJson(*text, JsonBounds{json_limits::kModelConfig}, "config.json",
                              StatusCode::kInvalidArgument);
  if (!cfg.ok() || !cfg->is_object()) return;  // the worker names the file's fault
  auto it = cfg->find("quantization_config");
  if (it == cfg->end() || it->is_null()) return;
  const nlohmann::json method =
      it->is_object() ? it->value("quant_method", nlohmann::json()) : nlohmann::json();
  if (method.is_string() && exporter::IsReadableCheckpointMethod(method.get<std::string>())) return;
  c.Bad("spec.model_uri", "the model's config.json has quantization_config.quant_method " +
                              method.dump() + ", which is not read; " +
                              exporter::kReadableCheckpoints);
}

void CheckQuantization(SpecChecker& c, const JobSpec& spec,
                       const StatusOr<config::QuantConfig>& resolved,
                       std::vector<std::string>* warnings) {
  const auto& q = spec.quantization();
  if (!resolved.ok()) {
    const Status status = resolved.status();
    for (const auto& v : status.violations()) c.Bad(v.field, v.description);
    if (status.violations().empty()) c.Bad("spec.quantization", status.message());
    return;
  }
  const config::QuantConfig& config = *resolved;
  // Keys that take no effect, a quant_method read as another.
  if (warnings) warnings->insert(warnings->end(), config.notes.begin(), config.notes.end());

  // What the pipeline does not run yet.
  if (!config.algorithms.empty()) {
    const auto plan = algo::PlanAlgorithms(config.algorithms, AlgorithmsField(q));
    const Status algos = plan.status();
    if (!algos.ok()) {
      for (const auto& v : algos.violations()) c.Bad(v.field, v.description);
      if (algos.violations().empty()) c.Bad(AlgorithmsField(q), algos.message());
    } else {
      // AWQ's scaling_layers against the model's groups, when its
      // config.json is readable here (the worker checks every block).
      std::optional<models::ModelConfig> model;
      for (const algo::PlannedAlgorithm& p : plan->block_algorithms) {
        const auto* awq = std::get_if<config::AwqOptions>(&p.options);
        if (!awq || (awq->scaling_layers.empty() && awq->model_decoder_layers.empty())) continue;
        if (!model) model = ReadModelConfig(spec.model_uri());
        if (!model || model->num_hidden_layers <= 0) break;
        const auto chosen =
            algo::AwqGroupSelection(*awq, models::GetBlockLayout(*model, 0),
                                    AlgorithmsField(q) + "[" + std::to_string(p.index) + "]");
        const Status status = chosen.status();
        for (const auto& v : status.violations()) c.Bad(v.field, v.description);
      }
    }
    if (spec.calibration().dataset_uri().empty())
      c.Bad("spec.calibration.dataset_uri",
            "quantization algorithms calibrate on data: set a calibration dataset");
    std::optional<models::ModelConfig> rotated_model;
    for (size_t i = 0; i < config.algorithms.size(); ++i) {
      const auto* rotation = std::get_if<config::RotationOptions>(&config.algorithms[i].options);
      if (rotation && !rotated_model) rotated_model = ReadModelConfig(spec.model_uri());
      const std::string rotation_problem =
          rotation && rotated_model ? algo::RotationArchitectureProblem(*rotated_model) : "";
      if (!rotation_problem.empty())
        c.Bad(AlgorithmsField(q) + "[" + std::to_string(i) + "]", rotation_problem);
      if (rotation && rotation->online_down_proj)
        c.NotBuilt(AlgorithmsField(q) + "[" + std::to_string(i) + "]",
                   "the online Hadamard rotation (R4) transforms down_proj's input at run time, "
                   "which no export format carries (the exported model would compute something "
                   "else); use rotation without online_hadamard");
    }
  }
  for (size_t i = 0; i < config.layer_type_quant_config.size(); ++i) {
    const std::string& type = config.layer_type_quant_config[i].layer_type;
    const config::LayerQuantConfig& lc = config.layer_type_quant_config[i].config;
    const std::string field = LayerTypeField(q, i, type);
    if (type == "Embedding") {
      // QuantEmbedding: the weight only (its input is token ids).
      if (lc.input_tensors) c.Bad(field + ".input_tensors", "an embedding's input is token ids");
      if (lc.output_tensors)
        c.Bad(field + ".output_tensors", "embedding outputs are not quantized; only the weight");
      if (lc.bias) c.Bad(field + ".bias", "an embedding has no bias");
      if (lc.weight) {
        for (int f = 0; f < spec.export_().formats_size(); ++f) {
          const auto format = ExportFormatFromProto(spec.export_().formats(f));
          if (format == exporter::ExportFormat::kHfQuark ||
              format == exporter::ExportFormat::kCompressedTensors)
            c.Bad("spec.export.formats[" + std::to_string(f) + "]",
                  std::string(exporter::ExportFormatName(*format)) +
                      " cannot carry a quantized embedding (vLLM's loader quantizes "
                      "Linear layers); export hf, gguf or onnx, or leave the embedding in float");
        }
      }
    } else if (type == "EmbeddingBag") {
      // Its input is indices too (TorchScript models, worker/torchscript).
      if (lc.input_tensors) c.Bad(field + ".input_tensors", "an embedding bag's input is indices");
    }
  }

  // Static activation specs are calibrated.
  bool static_activations = HasStaticActivations(config.global_quant_config);
  for (const auto& t : config.layer_type_quant_config) {
    static_activations = static_activations || HasStaticActivations(t.config);
  }
  for (const auto& n : config.layer_quant_config) {
    static_activations = static_activations || HasStaticActivations(n.config);
  }
  for (const auto& n : config.kv_cache_quant_config) {
    static_activations = static_activations || IsStaticActivation(n.config.output_tensors);
  }
  if (static_activations && spec.calibration().dataset_uri().empty()) {
    c.Bad("spec.calibration.dataset_uri",
          q.fp8_kv_cache() ? "the FP8 KV cache is calibrated: set a calibration dataset"
                           : "static activation quantization (input_tensors / output_tensors / "
                             "kv cache with is_dynamic false) is calibrated: set a calibration "
                             "dataset");
  }

  // Checks that need the model's layers, when its config.json is readable.
  if (c.OutOfTime("spec.quantization")) return;
  if (auto layers = ReadModelLayers(spec.model_uri())) {
    config::LayerCheck check =
        config::ValidateSettingsForLayers(q, config, *layers, c.deadline());
    for (const auto& v : check.status.violations()) c.Bad(v.field, v.description);
    if (check.out_of_time) {
      c.OutOfTime("spec.quantization", "matching the config's layer name patterns against the " +
                                           std::to_string(layers->size()) + " layers of " +
                                           spec.model_uri());
      return;  // the warnings would be incomplete
    }
    if (warnings) {
      for (auto& w : check.warnings) warnings->push_back(std::move(w));
    }
  }
}

void CheckCalibration(SpecChecker& c, const JobSpec& spec) {
  if (!spec.has_calibration()) return;
  const auto& cal = spec.calibration();
  CheckUri(c, "spec.calibration.dataset_uri", cal.dataset_uri(), false, UriRole::kDataset);
  CheckDatasetField(c, "spec.calibration", cal.dataset_uri(), cal.text_field());
  if (cal.has_num_samples() && cal.num_samples() <= 0)
    c.Bad("spec.calibration.num_samples", "must be positive");
  if (cal.has_seq_len() && cal.seq_len() < 2)
    c.Bad("spec.calibration.seq_len", "must be at least 2");
  if (!quantd::v1::SamplingMode_IsValid(cal.sampling()))
    c.Bad("spec.calibration.sampling",
          "unknown sampling mode " + std::to_string(cal.sampling()) + " (CONCAT or RANDOM_WINDOWS)");
  if (!quantd::v1::ComputeDtype_IsValid(cal.compute_dtype()))
    c.Bad("spec.calibration.compute_dtype",
          "unknown compute dtype " + std::to_string(cal.compute_dtype()) +
              " (COMPUTE_FLOAT32 or COMPUTE_BFLOAT16)");
  if (cal.has_min_expert_tokens() && cal.min_expert_tokens() < 0)
    c.Bad("spec.calibration.min_expert_tokens", "must not be negative");
  if (cal.sampling() == quantd::v1::CONCAT && cal.seed() != 0)
    c.Bad("spec.calibration.seed", "applies to RANDOM_WINDOWS sampling; CONCAT draws nothing");
}

void CheckEvaluation(SpecChecker& c, const JobSpec& spec) {
  if (!spec.has_evaluation()) return;
  const auto& ev = spec.evaluation();
  if (ev.disabled()) return;
  CheckUri(c, "spec.evaluation.dataset_uri", ev.dataset_uri(), false, UriRole::kDataset);
  CheckDatasetField(c, "spec.evaluation", ev.dataset_uri(), ev.text_field());
  if (ev.has_n_ctx() && (ev.n_ctx() < 2 || ev.n_ctx() > 1 << 20))
    c.Bad("spec.evaluation.n_ctx", "must be in [2, 1048576], got " + std::to_string(ev.n_ctx()));
  if (ev.max_windows() < 0) c.Bad("spec.evaluation.max_windows", "must not be negative");
  if (ev.has_max_perplexity_increase() && !(ev.max_perplexity_increase() >= 0))
    c.Bad("spec.evaluation.max_perplexity_increase", "must be a non-negative fraction (0.02 = 2%)");
  if (ev.has_max_kl_divergence() && !(ev.max_kl_divergence() >= 0))
    c.Bad("spec.evaluation.max_kl_divergence", "must not be negative");
  if (ev.has_max_accuracy_drop() && !(ev.max_accuracy_drop() >= 0 && ev.max_accuracy_drop() <= 1))
    c.Bad("spec.evaluation.max_accuracy_drop",
          "must be a fraction in [0, 1] (0.01 = one point of top-1 accuracy)");
  if ((ev.has_max_perplexity_increase() || ev.has_max_kl_divergence() ||
       ev.has_max_accuracy_drop()) &&
      ev.dataset_uri().empty())
    c.Bad("spec.evaluation.dataset_uri", "the accuracy gate needs an evaluation dataset");
}

void CheckQat(SpecChecker& c, const JobSpec& spec) {
  if (!spec.has_qat()) return;
  const quantd::v1::QatSpec& q = spec.qat();
  if (q.steps() < 1 || q.steps() > 1000000)
    c.Bad("spec.qat.steps", "must be in [1, 1000000], got " + std::to_string(q.steps()));
  if (q.has_learning_rate() && !(q.learning_rate() > 0 && q.learning_rate() <= 1))
    c.Bad("spec.qat.learning_rate", "must be in (0, 1]");
  if (q.has_batch_size() && (q.batch_size() < 1 || q.batch_size() > 65536))
    c.Bad("spec.qat.batch_size", "must be in [1, 65536], got " + std::to_string(q.batch_size()));
  CheckUri(c, "spec.qat.dataset_uri", q.dataset_uri(), false, UriRole::kDataset);
  if (q.dataset_uri().empty() && spec.calibration().dataset_uri().empty())
    c.Bad("spec.qat.dataset_uri",
          "training needs data: a tensor dataset here or in spec.calibration.dataset_uri");
  if (!quantd::v1::QatLoss_IsValid(q.loss()))
    c.Bad("spec.qat.loss", "unknown loss " + std::to_string(q.loss()) +
                               " (QAT_LOSS_CROSS_ENTROPY, QAT_LOSS_MSE or QAT_LOSS_DISTILLATION)");
  if (!quantd::v1::QatParameters_IsValid(q.parameters()))
    c.Bad("spec.qat.parameters", "unknown parameters " + std::to_string(q.parameters()) +
                                     " (QAT_WEIGHTS or QAT_WEIGHTS_AND_BIASES)");
}

// spec.sensitivity: distinct known presets, measured on calibration text of
// a decoder model.
void CheckSensitivity(SpecChecker& c, const JobSpec& spec) {
  if (!spec.has_sensitivity()) return;
  const auto& candidates = spec.sensitivity().candidates();
  if (candidates.empty() || candidates.size() > kMaxSensitivityCandidates)
    c.Bad("spec.sensitivity.candidates", "give 1 to " + std::to_string(kMaxSensitivityCandidates) +
                                             " preset names, got " +
                                             std::to_string(candidates.size()));
  std::set<std::string> seen;
  for (int i = 0; i < candidates.size() && i < kMaxSensitivityCandidates; ++i) {
    const std::string field = "spec.sensitivity.candidates[" + std::to_string(i) + "]";
    const auto preset = config::PresetConfig(candidates[i]);
    if (!preset.ok()) {
      c.Bad(field, "unknown preset '" + candidates[i].substr(0, 64) +
                       "' (docs/quant.md, \"Presets\", lists them)");
    } else if (!seen.insert(candidates[i]).second) {
      c.Bad(field, "'" + candidates[i] + "' is listed twice");
    }
  }
  if (spec.calibration().dataset_uri().empty())
    c.Bad("spec.calibration.dataset_uri",
          "the sensitivity is measured on the calibration samples: give calibration data");
  if (!spec.export_().gguf_type().empty())
    c.Bad("spec.sensitivity", "a llama.cpp recipe fixes every tensor's type; nothing to compare");
}

// spec.auto_precision: distinct candidates, a budget to meet and the data to
// measure against it; the candidates take the place of the scheme. Each
// candidate is also checked as the job's scheme (resolve_job.cc).
void CheckAutoPrecision(SpecChecker& c, const JobSpec& spec) {
  if (!spec.has_auto_precision()) return;
  const auto& ap = spec.auto_precision();
  const auto& candidates = ap.candidates();
  if (candidates.size() < 2 || candidates.size() > kMaxAutoPrecisionCandidates)
    c.Bad("spec.auto_precision.candidates",
          "give 2 to " + std::to_string(kMaxAutoPrecisionCandidates) +
              " names (presets or \"float\"), got " + std::to_string(candidates.size()));
  std::set<std::string> seen;
  int quantizing = 0;
  for (int i = 0; i < candidates.size() && i < kMaxAutoPrecisionCandidates; ++i) {
    const std::string field = "spec.auto_precision.candidates[" + std::to_string(i) + "]";
    const bool is_float = candidates[i] == kFloatCandidate;
    if (!is_float && !config::PresetConfig(candidates[i]).ok()) {
      c.Bad(field, "unknown candidate '" + candidates[i].substr(0, 64) +
                       "': a preset (docs/quant.md, \"Presets\") or \"float\"");
    } else if (!seen.insert(candidates[i]).second) {
      c.Bad(field, "'" + candidates[i] + "' is listed twice");
    } else if (!is_float) {
      ++quantizing;
    }
  }
  if (candidates.size() >= 2 && quantizing == 0)
    c.Bad("spec.auto_precision.candidates", "name at least one preset besides \"float\"");
  if (ap.has_max_rounds() && (ap.max_rounds() < 1 || ap.max_rounds() > 10))
    c.Bad("spec.auto_precision.max_rounds",
          "must be in [1, 10], got " + std::to_string(ap.max_rounds()));
  const auto& q = spec.quantization();
  if (q.source_case() != quantd::v1::QuantizationSettings::SOURCE_NOT_SET) {
    const char* source = q.has_config()       ? "spec.quantization.config"
                         : q.has_quark_json() ? "spec.quantization.quark_json"
                                              : "spec.quantization.scheme";
    c.Bad(source, "leave it unset: spec.auto_precision.candidates choose each layer's format");
  }
  const auto& costs = ap.cost_per_weight();
  if (costs.size() > kMaxAutoPrecisionCandidates) {
    c.Bad("spec.auto_precision.cost_per_weight",
          "give one cost per candidate, got " + std::to_string(costs.size()) + " entries");
  } else if (!costs.empty()) {
    for (const std::string& name : seen)
      if (costs.count(name) == 0)
        c.Bad("spec.auto_precision.cost_per_weight",
              "no cost for the candidate '" + name + "': the table names every candidate");
    std::map<std::string, double> sorted(costs.begin(), costs.end());  // a stable order
    for (const auto& [name, cost] : sorted) {
      const std::string field = "spec.auto_precision.cost_per_weight[" + name.substr(0, 64) + "]";
      if (seen.count(name) == 0)
        c.Bad(field, "not one of spec.auto_precision.candidates");
      else if (!(cost > 0 && cost <= kMaxCostPerWeight))
        c.Bad(field, "must be in (0, 1e6]");
    }
    // The search starts from the cheapest candidate; float would leave
    // nothing to quantize.
    const auto float_cost = sorted.find(kFloatCandidate);
    const auto cheaper = [&](const auto& entry) {
      return entry.first != kFloatCandidate && seen.count(entry.first) != 0 && entry.second > 0 &&
             entry.second < float_cost->second;
    };
    if (float_cost != sorted.end() && sorted.size() > 1 &&
        std::none_of(sorted.begin(), sorted.end(), cheaper))
      c.Bad("spec.auto_precision.cost_per_weight[float]",
            "float is the cheapest candidate: the search would quantize nothing");
  }
  // The budget: a language model's perplexity or KL divergence, a
  // classifier's (TorchScript model's) top-1 accuracy.
  const auto& ev = spec.evaluation();
  if (IsLocalScriptModel(spec.model_uri())) {
    if (!ev.has_max_accuracy_drop())
      c.Bad("spec.evaluation.max_accuracy_drop",
            "spec.auto_precision needs a budget: a TorchScript model's is max_accuracy_drop");
    for (const auto& [set, field] :
         {std::pair{ev.has_max_perplexity_increase(), "spec.evaluation.max_perplexity_increase"},
          std::pair{ev.has_max_kl_divergence(), "spec.evaluation.max_kl_divergence"}})
      if (set)
        c.Bad(field,
              "a TorchScript model is measured by top-1 accuracy: set max_accuracy_drop instead");
  } else {
    if (!ev.has_max_perplexity_increase() && !ev.has_max_kl_divergence())
      c.Bad("spec.evaluation.max_perplexity_increase",
            "spec.auto_precision needs a budget: set max_perplexity_increase and / or "
            "max_kl_divergence");
    if (ev.has_max_accuracy_drop())
      c.Bad("spec.evaluation.max_accuracy_drop",
            "is a classifier's budget (a TorchScript model); a language model's is "
            "max_perplexity_increase or max_kl_divergence");
  }
  if (ev.disabled() || ev.dataset_uri().empty())
    c.Bad("spec.evaluation.dataset_uri", "spec.auto_precision measures every round on it");
  if (spec.calibration().dataset_uri().empty())
    c.Bad("spec.calibration.dataset_uri",
          "spec.auto_precision measures the sensitivities on calibration samples");
  if (!spec.export_().gguf_type().empty())
    c.Bad("spec.auto_precision", "a llama.cpp recipe fixes every tensor's type");
  if (spec.has_sensitivity())
    c.Bad("spec.sensitivity", "spec.auto_precision measures the candidates' sensitivities itself");
  if (spec.has_qat()) c.Bad("spec.qat", "is not run with spec.auto_precision");
}

// Every spec a config entry asks for, for CheckExportSupport; the names are
// the config's (the worker checks again per layer before it writes).
std::vector<exporter::ExportLayerSpecs> ConfigExportSpecs(const config::QuantConfig& config) {
  std::vector<exporter::ExportLayerSpecs> out;
  auto add = [&out](const std::string& name, const config::LayerQuantConfig& l) {
    if (!l.empty()) out.push_back({name, l.weight, l.bias, l.input_tensors, l.output_tensors});
  };
  add("global_quant_config", config.global_quant_config);
  for (const auto& t : config.layer_type_quant_config) {
    // A quantized embedding is written as its fake-quantized values in every
    // format that takes it (CheckQuantization refuses hf_quark).
    if (t.layer_type == "Embedding") continue;
    add("layer_type_quant_config." + t.layer_type, t.config);
  }
  for (const auto& n : config.layer_quant_config) add("layer_quant_config." + n.pattern, n.config);
  for (const auto& n : config.kv_cache_quant_config)
    add("kv_cache_quant_config." + n.pattern, n.config);
  return out;
}

// GPTQ with act_order and without static_groups fits each weight group to a
// run of permuted columns: a column-to-group map (g_idx) that only
// compressed_tensors writes; the other real-quantized formats store
// contiguous groups.
bool GroupsOfPermutedColumns(const config::QuantConfig& config) {
  const bool permuted = std::any_of(
      config.algorithms.begin(), config.algorithms.end(), [](const config::AlgorithmConfig& a) {
        const auto* g = std::get_if<config::GptqOptions>(&a.options);
        return g != nullptr && g->act_order && !g->static_groups;
      });
  if (!permuted) return false;
  for (const exporter::ExportLayerSpecs& l : ConfigExportSpecs(config))
    if (l.weight && l.weight->qscheme == quant::QScheme::kPerGroup) return true;
  return false;
}

// export.gguf_type: a llama.cpp recipe that is the job's quantization.
void CheckGgufRecipe(SpecChecker& c, const JobSpec& spec) {
  const auto& ex = spec.export_();
  const std::string field = "spec.export.gguf_type";
  const std::string name = ex.gguf_type();
  const auto recipe = gguf::GgufFileTypeFromName(name);
  if (!recipe) {
    const std::string shown = name.size() <= 16 ? "'" + name + "'" : "the value";
    c.Bad(field, shown + " is not a llama.cpp file type quantd writes (" +
                     gguf::AllGgufFileTypeNames() + ")");
  }
  const std::string what =
      recipe ? "the llama.cpp recipe " + std::string(gguf::GgufFileTypeName(*recipe))
             : "a llama.cpp recipe";
  const bool gguf =
      std::find(ex.formats().begin(), ex.formats().end(), quantd::v1::GGUF) != ex.formats().end();
  if (!gguf) c.Bad(field, "names the GGUF file's recipe; formats has no GGUF");
  for (int i = 0; i < ex.formats_size(); ++i) {
    const int f = ex.formats(i);
    if (f == quantd::v1::GGUF || f == quantd::v1::HF_FAKE_QUANTIZED) continue;
    const auto format = ExportFormatFromProto(f);
    if (!format) continue;  // reported with the formats
    c.Bad("spec.export.formats[" + std::to_string(i) + "]",
          std::string(exporter::ExportFormatName(*format)) + " cannot hold the blocks of " + what +
              " (export.gguf_type); export gguf, and hf_fake_quantized for the same weights "
              "decoded");
  }
  // Without GGUF, CheckExport already said gguf_float_type has no GGUF.
  if (gguf && ex.gguf_float_type() != quantd::v1::GGUF_FLOAT_TYPE_UNSPECIFIED)
    c.Bad("spec.export.gguf_float_type",
          what +
              " (export.gguf_type) chooses every tensor's type; gguf_float_type applies to "
              "jobs that export their own codes");
  // Settings beside a recipe: only algorithms that quantize with its block
  // types (GPTQ), and where calibration runs.
  const auto& q = spec.quantization();
  if (!config::HoldsOnlyRecipeSettings(q))
    c.Bad("spec.quantization",
          what +
              " (export.gguf_type) quantizes every weight itself, as llama-quantize does; "
              "set only quantization.algorithms (gptq) beside it, or drop gguf_type to export "
              "the job's own codes");
  for (int i = 0; i < q.algorithms_size(); ++i) {
    const std::string field = "spec.quantization.algorithms[" + std::to_string(i) + "]";
    const auto& a = q.algorithms(i);
    if (a.algorithm_case() == quantd::v1::AlgorithmConfig::ALGORITHM_NOT_SET) continue;
    if (a.algorithm_case() != quantd::v1::AlgorithmConfig::kGptq) {
      c.Bad(field, "only gptq runs with " + what +
                       " (export.gguf_type): it quantizes with the recipe's block types; the "
                       "other algorithms change the float weights the recipe reads");
    } else if (a.gptq().act_order() && !a.gptq().static_groups()) {
      c.Bad(field + ".gptq.act_order",
            "with " + what +
                " GPTQ fits each block's scales on consecutive columns when it reaches them; "
                "act_order needs static_groups (every block fit before the loop)");
    }
  }
}

void CheckExport(SpecChecker& c, const JobSpec& spec,
                 const StatusOr<config::QuantConfig>& resolved) {
  const auto& ex = spec.export_();
  const bool vllm = ex.target() == quantd::v1::SERVING_TARGET_VLLM;
  std::vector<exporter::ExportFormat> vllm_formats;  // that can hold the config
  // The model's architecture, when its config is readable here.
  const std::optional<models::ModelConfig> model =
      ex.formats_size() > 0 ? ReadModelConfig(spec.model_uri()) : std::nullopt;
  const bool script = ex.formats_size() > 0 && IsLocalScriptModel(spec.model_uri());
  for (int i = 0; i < ex.formats_size(); ++i) {
    const std::string field = "spec.export.formats[" + std::to_string(i) + "]";
    const std::optional<exporter::ExportFormat> format = ExportFormatFromProto(ex.formats(i));
    if (!format) {
      c.Bad(field, "unknown export format " + std::to_string(ex.formats(i)));
      continue;
    }
    // As the worker's TorchScript job refuses them (script_job.cc), before
    // any work (an auto-precision search would otherwise run every round).
    if (script && *format != exporter::ExportFormat::kTorchScript &&
        *format != exporter::ExportFormat::kOnnxQdq &&
        *format != exporter::ExportFormat::kHfQuark) {
      c.Bad(field, std::string(exporter::ExportFormatName(*format)) +
                       " is a language-model format; a TorchScript model exports torchscript, "
                       "onnx_qdq or hf_quark");
      continue;
    }
    if (model) {
      const Status held = exporter::CheckArchitectureSupport(*format, *model);
      if (!held.ok()) {
        c.Bad(field, held.message());
        continue;
      }
    }
    if (vllm && !exporter::IsVllmFormat(*format)) {
      c.Bad(field, FormatNotServed(*format));
      continue;
    }
    if (!resolved.ok()) continue;  // CheckQuantization reported it
    if (*format != exporter::ExportFormat::kHfFakeQuantized &&
        *format != exporter::ExportFormat::kCompressedTensors &&
        GroupsOfPermutedColumns(*resolved)) {
      c.Bad(field, std::string(exporter::ExportFormatName(*format)) +
                       " stores each weight group as contiguous columns, but GPTQ with act_order "
                       "and without static_groups groups permuted columns (a g_idx): set "
                       "static_groups, or export compressed_tensors (weight_g_idx) or "
                       "hf_fake_quantized");
      continue;
    }
    std::vector<exporter::ExportLayerSpecs> specs = ConfigExportSpecs(*resolved);
    if (*format == exporter::ExportFormat::kOnnxQdq && script) {
      for (exporter::ExportLayerSpecs& l : specs) {
        l.weight.reset();
        l.bias.reset();
      }
    }
    const Status s = exporter::CheckExportSupport(*format, specs);
    if (!s.ok()) c.Bad(field, s.message());
    if (s.ok() && exporter::IsVllmFormat(*format)) vllm_formats.push_back(*format);
  }
  if (!ex.output_uri().empty())
    CheckUri(c, "spec.export.output_uri", ex.output_uri(), false, UriRole::kOutput);
  if (!quantd::v1::GgufFloatType_IsValid(ex.gguf_float_type())) {
    c.Bad("spec.export.gguf_float_type", "unknown value " + std::to_string(ex.gguf_float_type()) +
                                             " (GGUF_F32, GGUF_F16 or GGUF_BF16)");
  } else if (ex.gguf_float_type() != quantd::v1::GGUF_FLOAT_TYPE_UNSPECIFIED &&
             std::find(ex.formats().begin(), ex.formats().end(), quantd::v1::GGUF) ==
                 ex.formats().end()) {
    c.Bad("spec.export.gguf_float_type", "applies to the GGUF export only; formats has no GGUF");
  }
  if (!ex.gguf_type().empty()) CheckGgufRecipe(c, spec);
  if (!quantd::v1::ServingTarget_IsValid(ex.target())) {
    c.Bad("spec.export.target", "unknown value " + std::to_string(ex.target()) +
                                    " (SERVING_TARGET_ANY or SERVING_TARGET_VLLM)");
  } else if (vllm && resolved.ok() && !c.OutOfTime("spec.export.target")) {
    const std::optional<models::ModelConfig> model = ReadModelConfig(spec.model_uri());
    const std::string problem = model ? exporter::VllmArchitectureProblem(*model) : "";
    if (!problem.empty()) c.Bad("spec.export.target", "target vllm: " + problem);
    if (problem.empty())
      for (const FieldViolation& v : CheckServingTarget(
               spec, *resolved, vllm_formats, ReadModelLayers(spec.model_uri()), c.deadline()))
        c.Bad(v.field, v.description);
  }
}

}  // namespace

Status CheckResolvedJobSpec(const JobSpec& spec, const StatusOr<config::QuantConfig>& quantization,
                            std::vector<std::string>* warnings, std::chrono::milliseconds budget) {
  SpecChecker c(budget.count() > 0 ? Deadline::After(budget) : Deadline::Never());
  CheckUri(c, "spec.model_uri", spec.model_uri(), true, UriRole::kModel);
  CheckModelCheckpoint(c, spec);
  CheckQuantization(c, spec, quantization, warnings);
  CheckCalibration(c, spec);
  CheckEvaluation(c, spec);
  CheckQat(c, spec);
  CheckSensitivity(c, spec);
  CheckAutoPrecision(c, spec);
  if (!c.OutOfTime("spec.export")) CheckExport(c, spec, quantization);
  if (!ValidDevice(spec.device()))
    c.Bad("spec.device", "'" + spec.device() + "' is not one of cpu, cuda, cuda:N");
  if (spec.has_max_attempts() && (spec.max_attempts() < 1 || spec.max_attempts() > 100))
    c.Bad("spec.max_attempts", "must be in [1, 100]");
  return c.Result();
}

}  // namespace quantd::job_spec
