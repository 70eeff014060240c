#include "worker/precision/auto_precision_job.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <utility>

#include "worker/common/bounded_json.h"
#include "worker/common/sha256.h"
#include "worker/config/presets.h"
#include "worker/config/quark_json.h"
#include "worker/job_spec/quantization_settings.h"
#include "worker/models/layer_shapes.h"
#include "worker/models/model_config.h"
#include "worker/pipeline/quantization_job.h"
#include "worker/pipeline/weight_quantizer.h"
#include "worker/precision/precision_search.h"
#include "worker/quant/fake_quant.h"
#include "worker/torchscript/script_job.h"
#include "worker/torchscript/script_model.h"
#include "worker/torchscript/script_quantizer.h"

namespace quantd::precision {
namespace {

namespace fs = std::filesystem;
using pipeline::JobObserver;
using pipeline::JobOptions;
using pipeline::JobOutcome;

constexpr char kFloat[] = "float";
// A cache entry is the worker's own file; the bound only keeps a damaged
// one from costing memory.
constexpr size_t kMaxCacheBytes = size_t{64} << 20;

// A round's events reach the job's observer marked with the round: progress
// mapped into its share of the job, warnings and errors forwarded, block
// metrics only from the final job (the one whose result the job reports).
class RoundObserver : public JobObserver {
 public:
  RoundObserver(JobObserver& outer, std::string label, double from, double to, bool final_job)
      : outer_(outer), label_(std::move(label)), from_(from), to_(to), final_(final_job) {}
  void OnProgress(const pipeline::ProgressInfo& p) override {
    pipeline::ProgressInfo mapped = p;
    mapped.percent = from_ + (to_ - from_) * p.percent / 100.0;
    mapped.message = label_ + (p.message.empty() ? "" : ": " + p.message);
    outer_.OnProgress(mapped);
  }
  void OnLog(pipeline::LogLevel level, const std::string& message) override {
    if (final_ || level != pipeline::LogLevel::kInfo) outer_.OnLog(level, label_ + ": " + message);
  }
  void OnBlock(const pipeline::BlockReport& block) override {
    if (final_) outer_.OnBlock(block);
  }
  bool CancelRequested() const override { return outer_.CancelRequested(); }

 private:
  JobObserver& outer_;
  std::string label_;
  double from_, to_;
  bool final_;
};

// fnmatch treats * ? [ as patterns; a layer name is matched as it is.
std::string LiteralGlob(const std::string& name) {
  std::string out;
  for (char ch : name) {
    if (ch == '*' || ch == '?' || ch == '[') {
      out += '[';
      out += ch;
      out += ']';
    } else {
      out += ch;
    }
  }
  return out;
}

std::string Percent(double fraction) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%+.2f%%", 100.0 * fraction);
  return buf;
}

// What a round's evaluation measured: perplexities and the mean KL
// divergence of a language model, or a classifier's top-1 accuracies.
struct Measured {
  double float_ppl = 0;
  double ppl = 0;
  std::optional<double> kl;
  std::optional<double> float_top1;
  std::optional<double> top1;

  std::optional<double> PplIncrease() const {
    if (!(float_ppl > 0)) return std::nullopt;
    return ppl / float_ppl - 1.0;
  }
  std::optional<double> AccuracyDrop() const {
    if (!float_top1 || !top1) return std::nullopt;
    return *float_top1 - *top1;
  }
};

// One metric of the budget: how a round measured it, and its limit.
struct Limit {
  std::optional<double> (*metric)(const Measured&);
  std::optional<double> max;
};

// The budget of the evaluation gate: each metric it sets must be measured
// and within its limit.
struct Budget {
  std::vector<Limit> limits;

  explicit Budget(const pipeline::EvaluationOptions& e) {
    limits = {
        {[](const Measured& m) { return m.PplIncrease(); }, e.max_perplexity_increase},
        {[](const Measured& m) { return m.kl; }, e.max_kl_divergence},
        {[](const Measured& m) { return m.AccuracyDrop(); }, e.max_accuracy_drop},
    };
  }
  bool Met(const Measured& m) const {
    for (const Limit& l : limits) {
      if (!l.max) continue;
      const std::optional<double> v = l.metric(m);
      if (!(v && *v <= *l.max)) return false;
    }
    return true;
  }
  // How far over the budget, as the worst measured / allowed ratio (for
  // choosing the most accurate round when none meets it).
  double Excess(const Measured& m) const {
    double worst = 0;
    for (const Limit& l : limits) {
      if (!l.max) continue;
      const double v = l.metric(m).value_or(std::numeric_limits<double>::infinity());
      worst = std::max(worst, v / std::max(*l.max, 1e-12));
    }
    return worst;
  }
};

// The linear prediction metric ~= slope * summed sensitivity, each slope
// (one per budget metric, in Budget::limits' order) taken from the latest
// measured round.
struct Prediction {
  std::vector<std::optional<double>> slopes;

  void Learn(const Budget& b, const Measured& m, double sensitivity) {
    slopes.resize(b.limits.size());
    if (!(sensitivity > 0)) return;
    for (size_t i = 0; i < b.limits.size(); ++i)
      if (const std::optional<double> v = b.limits[i].metric(m))
        slopes[i] = std::max(0.0, *v) / sensitivity;
  }
  // Metric i predicted for a summed sensitivity.
  std::optional<double> Predict(size_t i, double sensitivity) const {
    if (i >= slopes.size() || !slopes[i]) return std::nullopt;
    return *slopes[i] * sensitivity;
  }
  // The largest summed sensitivity predicted to meet the budget.
  double Target(const Budget& b) const {
    double t = std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < b.limits.size() && i < slopes.size(); ++i)
      if (b.limits[i].max && slopes[i] && *slopes[i] > 0)
        t = std::min(t, *b.limits[i].max / *slopes[i]);
    return t;
  }
};

struct Candidate {
  std::string name;
  std::optional<config::LayerQuantConfig> config;  // unset: float
};

// Whether a group (or MX block) of `spec` divides a width.
bool GroupDivides(const std::optional<quant::QuantSpec>& spec, int64_t width) {
  const int group = spec ? quant::EffectiveGroupSize(*spec) : 0;
  return group <= 0 || width % group == 0;
}

// A layer the search assigns formats to.
struct ModelLayer {
  std::string name;
  std::string type;            // as the planner takes it: "Linear", "Conv2d", ...
  std::vector<int64_t> shape;  // the weight's
  bool script = false;         // a TorchScript layer (its weight axes follow its type)
  at::Tensor weight;           // a TorchScript layer's, for the fit check

  int64_t Weights() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  // The candidate's weight spec as this layer applies it.
  std::optional<quant::QuantSpec> WeightSpec(const Candidate& c) const {
    if (!c.config) return std::nullopt;
    return script ? torchscript::WithLayerAxes(c.config->weight, type) : c.config->weight;
  }
  // Whether the candidate can quantize the layer: its groups (and MX
  // blocks) divide the widths they run along.
  bool Fits(const Candidate& c) const {
    if (!c.config) return true;
    if (!script) {
      return GroupDivides(c.config->weight, shape[1]) &&
             GroupDivides(c.config->input_tensors, shape[1]);
    }
    if (const auto spec = WeightSpec(c)) {
      try {
        if (!quant::ComputeQParams(weight, *spec).ok()) return false;
      } catch (const std::exception&) {
        return false;
      }
    }
    if (type == "Embedding" || type == "EmbeddingBag") return true;  // integer inputs
    return GroupDivides(c.config->input_tensors, shape[type == "ConvTranspose2d" ? 0 : 1]);
  }
  // Bytes of the weight as the candidate stores it (float: the model's
  // width).
  int64_t Bytes(const Candidate& c, int64_t float_bits) const {
    if (const auto spec = WeightSpec(c)) return pipeline::QuantizedStorageBytes(shape, *spec);
    return Weights() * float_bits / 8;
  }
};

// The layers a search assigns and the model's float width.
struct SearchModel {
  int64_t float_bits = 32;
  std::vector<ModelLayer> layers;
};

// A language model's decoder-block linears that `probe` quantizes.
StatusOr<SearchModel> LanguageModelLayers(const JobOptions& job, const config::QuantConfig& probe) {
  QD_ASSIGN_OR_RETURN(models::ModelConfig model_config, models::LoadModelConfig(job.model_dir));
  SearchModel m;
  const std::string& dtype = model_config.torch_dtype;
  m.float_bits = dtype == "bfloat16" || dtype == "float16" ? 16 : 32;
  for (const auto& l : models::ListLinearLayers(model_config)) {
    if (l.block < 0 || !config::ResolveLayer(probe, l.name, l.type).quantized) continue;
    m.layers.push_back({l.name, l.type, {l.out_features, l.in_features}});
  }
  return m;
}

// A TorchScript model's quantizable layers that `probe` quantizes.
StatusOr<SearchModel> ScriptModelLayers(const JobOptions& job, const config::QuantConfig& probe) {
  auto model = torchscript::ScriptModel::Load(job.model_dir);
  if (!model.ok()) return Status(model.status()).Prepend("spec.model_uri: ");
  SearchModel m;
  for (const torchscript::ScriptLayer& l : model->Layers()) {
    if (!config::ResolveLayer(probe, l.name, l.type).quantized) continue;
    at::Tensor weight = l.module.attr("weight").toTensor().detach();
    m.layers.push_back({l.name, l.type, weight.sizes().vec(), true, weight});
  }
  return m;
}

// What identifies a first round: the model's files, the data and how it is
// read, the candidates and the settings every round shares.
std::string CacheKey(const JobOptions& job, const AutoPrecisionOptions& search) {
  std::ostringstream key;
  key << "auto-precision v2\n"
      << (job.model_source.empty() ? job.model_dir : job.model_source) << '\n';
  std::error_code ec;
  std::vector<std::string> files;
  auto add = [&](const fs::directory_entry& e) {
    if (!e.is_regular_file(ec)) return;
    const auto size = e.file_size(ec);
    const auto time = e.last_write_time(ec).time_since_epoch().count();
    files.push_back(e.path().filename().string() + " " + std::to_string(size) + " " +
                    std::to_string(time));
  };
  if (fs::is_regular_file(job.model_dir, ec)) {
    add(fs::directory_entry(job.model_dir, ec));  // a TorchScript archive
  } else {
    for (const auto& e : fs::directory_iterator(job.model_dir, ec)) add(e);
  }
  std::sort(files.begin(), files.end());
  for (const auto& f : files) key << f << '\n';
  const auto& c = job.calibration;
  key << c.dataset_path << '|' << c.dataset_revision << '|' << c.text_field << '|' << c.num_samples
      << '|' << c.seq_len << '|' << static_cast<int>(c.sampling) << '|' << c.seed << '|'
      << c.on_float_outputs << '|' << static_cast<int>(c.compute_dtype) << '\n';
  for (const auto& f : c.dataset_files) key << f << '\n';
  const auto& e = job.evaluation;
  key << e.dataset_path << '|' << e.dataset_revision << '|' << e.text_field << '|' << e.n_ctx << '|'
      << e.max_windows << '\n';
  for (const auto& f : e.dataset_files) key << f << '\n';
  const auto& t = job.tensor_model;
  key << t.fold_batchnorm.value_or(-1) << '|' << t.batch_size << '|'
      << t.calibration_samples.value_or(-1) << '\n';
  for (const auto& [name, cost] : search.cost_per_weight) key << name << '=' << cost << ',';
  key << '\n';
  for (const auto& name : search.candidates) key << name << ',';
  key << '|' << search.group_size.value_or(0) << '\n'
      << config::WriteQuarkJson(job.quant_config, -1);
  return Sha256Hex(key.str());
}

struct FirstRound {
  std::map<std::string, std::vector<double>> sensitivity;  // per quantizing candidate
  Measured measured;
};

std::optional<FirstRound> ReadCache(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto parsed = ParseBoundedJson(text, {kMaxCacheBytes}, path);
  if (!parsed.ok() || !parsed->is_object()) return std::nullopt;
  const nlohmann::json& j = *parsed;
  FirstRound r;
  if (!j.contains("layers") || !j["layers"].is_object()) return std::nullopt;
  for (const auto& [name, values] : j["layers"].items()) {
    if (!values.is_array()) return std::nullopt;
    std::vector<double>& v = r.sensitivity[name];
    for (const auto& x : values) {
      if (!x.is_number()) return std::nullopt;
      v.push_back(x.get<double>());
    }
  }
  auto number = [&j](const char* key) -> std::optional<double> {
    if (j.contains(key) && j[key].is_number()) return j[key].get<double>();
    return std::nullopt;
  };
  r.measured.float_ppl = number("float_perplexity").value_or(0);
  r.measured.ppl = number("perplexity").value_or(0);
  r.measured.kl = number("kl");
  r.measured.float_top1 = number("float_top1_accuracy");
  r.measured.top1 = number("top1_accuracy");
  return r;
}

void WriteCache(const std::string& path, const FirstRound& r) {
  nlohmann::json j;
  j["layers"] = nlohmann::json::object();
  for (const auto& [name, v] : r.sensitivity) j["layers"][name] = v;
  j["float_perplexity"] = r.measured.float_ppl;
  j["perplexity"] = r.measured.ppl;
  if (r.measured.kl) j["kl"] = *r.measured.kl;
  if (r.measured.float_top1) j["float_top1_accuracy"] = *r.measured.float_top1;
  if (r.measured.top1) j["top1_accuracy"] = *r.measured.top1;
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  const std::string tmp = path + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << j.dump();
    if (!out) return;
  }
  fs::rename(tmp, path, ec);
}

// The job that quantizes as `formats` says (a candidate per searched layer).
config::QuantConfig ConfigOf(const config::QuantConfig& base, const std::vector<Candidate>& cands,
                             const std::vector<std::string>& layers, const Assignment& formats) {
  config::QuantConfig cfg = base;
  for (size_t i = 0; i < formats.size(); ++i) {
    const Candidate& c = cands[formats[i]];
    const std::string glob = LiteralGlob(layers[i]);
    if (c.config) {
      cfg.layer_quant_config.push_back({glob, *c.config});
    } else {
      cfg.exclude.push_back(glob);
    }
  }
  cfg.reference_json.clear();  // written afresh from the fields
  return cfg;
}

// `script`: a TorchScript model, measured as a classifier (top-1 accuracy).
StatusOr<Measured> MeasuredOf(const pipeline::JobReport& r, bool script) {
  Measured m;
  if (script) {
    const auto& t = r.tensor_evaluation;
    if (!t || !t->float_top1_accuracy || !t->quantized_top1_accuracy) {
      const std::string why =
          "the evaluation dataset has no 'label' tensor: the budget (max_accuracy_drop) is "
          "measured as top-1 accuracy";
      return Status(StatusCode::kFailedPrecondition, "spec.evaluation.dataset_uri: " + why,
                    "INVALID_DATASET")
          .AddViolation("spec.evaluation.dataset_uri", why);
    }
    m.float_top1 = t->float_top1_accuracy;
    m.top1 = t->quantized_top1_accuracy;
    return m;
  }
  if (!r.float_perplexity || !r.quantized_perplexity || !(r.float_perplexity->ppl > 0))
    return InternalError("the round measured no perplexity");
  m.float_ppl = r.float_perplexity->ppl;
  m.ppl = r.quantized_perplexity->ppl;
  m.kl = r.kl_mean;
  return m;
}

// "round 2: 7.71 bits/weight, perplexity 4.8131 (+0.78%, predicted +1.20%),
// KL 0.01446" or, for a classifier, "top-1 90.50% (-0.75 points, ...)".
std::string RoundLine(const pipeline::AutoPrecisionRound& r, const Measured& m) {
  char line[256];
  std::snprintf(line, sizeof(line), "auto precision round %d: %.2f bits/weight", r.round,
                r.bits_per_weight);
  std::string out = line;
  if (r.cost) {
    std::snprintf(line, sizeof(line), ", cost %.6g", *r.cost);
    out += line;
  }
  if (r.accuracy_drop) {
    std::snprintf(line, sizeof(line), ", top-1 %.2f%% (%+.2f points", 100 * r.top1_accuracy.value(),
                  -100 * *r.accuracy_drop);
    out += line;
    if (r.predicted_accuracy_drop) {
      std::snprintf(line, sizeof(line), ", predicted %+.2f", -100 * *r.predicted_accuracy_drop);
      out += line;
    }
    return out + ")";
  }
  std::snprintf(line, sizeof(line), ", perplexity %.4f (%s", m.ppl,
                Percent(r.perplexity_increase).c_str());
  out += line;
  if (r.predicted_perplexity_increase)
    out += ", predicted " + Percent(*r.predicted_perplexity_increase);
  out += ")";
  if (m.kl) {
    std::snprintf(line, sizeof(line), ", KL %.5f", *m.kl);
    out += line;
  }
  return out;
}

}  // namespace

pipeline::JobOutcome RunAutoPrecisionJob(const JobOptions& job, const AutoPrecisionOptions& opts,
                                         JobObserver& observer) {
  JobOutcome failed;
  auto fail = [&failed](Status s) {
    failed.status = std::move(s);
    return failed;
  };
  // The candidates' layer configs.
  std::vector<Candidate> cands;
  for (const std::string& name : opts.candidates) {
    if (name == kFloat) {
      cands.push_back({name, std::nullopt});
      continue;
    }
    auto preset = config::PresetConfig(name, opts.group_size);
    if (!preset.ok()) return fail(Status(preset.status()).Prepend("spec.auto_precision: "));
    cands.push_back({name, preset->global_quant_config});
  }
  std::vector<double> cost_per_weight;  // per candidate; empty: bytes
  if (!opts.cost_per_weight.empty()) {
    for (const Candidate& c : cands) {
      auto it = opts.cost_per_weight.find(c.name);
      if (it == opts.cost_per_weight.end())
        return fail(
            InvalidArgumentError("spec.auto_precision.cost_per_weight: no cost for " + c.name));
      cost_per_weight.push_back(it->second);
    }
  }
  // A remote model's kind is known only now (CreateJob checks local ones).
  const bool script = torchscript::IsScriptModelPath(job.model_dir);
  const auto& ev = job.evaluation;
  const bool llm_budget = ev.max_perplexity_increase || ev.max_kl_divergence;
  if (script ? (!ev.max_accuracy_drop || llm_budget) : (ev.max_accuracy_drop || !llm_budget))
    return fail(InvalidArgumentError(
        script ? "spec.evaluation: a TorchScript model's budget is max_accuracy_drop alone (top-1 "
                 "accuracy)"
               : "spec.evaluation: a language model's budget is max_perplexity_increase and / or "
                 "max_kl_divergence"));

  const Budget budget(job.evaluation);
  const int max_rounds = std::max(1, opts.max_rounds);
  const double round_share = 85.0 / (max_rounds + 1);
  JobOptions round_job = job;
  round_job.export_options.formats.clear();  // rounds only measure
  round_job.export_options.formats_given = true;
  round_job.evaluation.max_perplexity_increase.reset();
  round_job.evaluation.max_kl_divergence.reset();
  round_job.evaluation.max_accuracy_drop.reset();
  // One job of the search; a measuring round's failure names the round.
  auto run = [&](const config::QuantConfig& cfg, const std::string& label, int round,
                 bool final_job, std::vector<pipeline::SensitivityCandidate> sensitivity = {}) {
    JobOptions o = final_job ? job : round_job;
    o.quant_config = cfg;
    o.planner = job_spec::PlannerFor(cfg);
    o.quantization_description = "auto precision, " + label;
    o.sensitivity = std::move(sensitivity);
    if (!final_job) o.scratch_dir = job.scratch_dir + "/round-" + std::to_string(round);
    const double from = final_job ? 85.0 : round_share * (round - 1);
    RoundObserver obs(observer, final_job ? label : "round " + std::to_string(round), from,
                      final_job ? 100.0 : from + round_share, final_job);
    JobOutcome r =
        script ? torchscript::RunScriptJob(o, obs) : pipeline::RunQuantizationJob(o, obs);
    if (!final_job && !r.status.ok())
      r.status = Status(r.status).Prepend("auto precision round " + std::to_string(round) + ": ");
    return r;
  };

  // The candidates from cheapest to dearest: by the user's cost table, else
  // by their bytes for a typical 4096-wide linear (the order does not
  // depend on the shape in practice).
  std::vector<int> by_cost(cands.size());
  for (size_t c = 0; c < cands.size(); ++c) by_cost[c] = static_cast<int>(c);
  const ModelLayer typical{"", "Linear", {4096, 4096}};
  auto nominal = [&](int c) {
    return cost_per_weight.empty() ? static_cast<double>(typical.Bytes(cands[c], 32))
                                   : cost_per_weight[c];
  };
  std::stable_sort(by_cost.begin(), by_cost.end(),
                   [&](int a, int b) { return nominal(a) < nominal(b); });
  const int cheapest = by_cost[0];
  if (!cands[cheapest].config)
    return fail(InvalidArgumentError(
        "spec.auto_precision.candidates: float is the cheapest candidate; nothing to search"));

  // The searched layers, in model order: a language model's decoder-block
  // linears or a TorchScript model's quantizable layers, those the job
  // would quantize; and for each candidate the format a layer really takes
  // (the next dearer candidate that fits it when the candidate does not).
  config::QuantConfig probe = job.quant_config;
  probe.global_quant_config = *cands[cheapest].config;
  StatusOr<SearchModel> model =
      script ? ScriptModelLayers(job, probe) : LanguageModelLayers(job, probe);
  if (!model.ok()) return fail(model.status());
  std::vector<std::vector<int>> effective;
  for (const ModelLayer& l : model->layers) {
    std::vector<int> eff(cands.size());
    for (size_t k = 0; k < by_cost.size(); ++k) {
      size_t up = k;
      while (up < by_cost.size() && !l.Fits(cands[by_cost[up]])) ++up;
      if (up == by_cost.size())
        return fail(InvalidArgumentError(
            "spec.auto_precision.candidates: no candidate fits " + l.name +
            " (their groups do not divide its width); add a per-channel candidate or \"float\""));
      eff[by_cost[k]] = by_cost[up];
    }
    effective.push_back(std::move(eff));
  }
  std::vector<std::string> names;
  for (const ModelLayer& l : model->layers) names.push_back(l.name);
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < names.size(); ++i) index[names[i]] = i;
  auto formats_of = [&](const Assignment& a) {
    Assignment out(a.size());
    for (size_t i = 0; i < a.size(); ++i) out[i] = effective[i][a[i]];
    return out;
  };
  size_t refitted = 0;
  for (const auto& eff : effective) refitted += eff[cheapest] != cheapest;
  if (refitted > 0) {
    observer.OnLog(pipeline::LogLevel::kInfo,
                   "auto precision: " + std::to_string(refitted) + " of " +
                       std::to_string(names.size()) + " layers cannot take " +
                       cands[cheapest].name +
                       " (its group does not divide their width); where a candidate does not "
                       "fit, the layer takes the next dearer one that does");
  }

  // Round 1: every layer in the cheapest candidate, measuring the
  // sensitivities on the way (or both from the cache).
  // Round 1 measures the quantizing candidates, in order: candidate c's
  // values are at measured_as[c].
  std::vector<size_t> measured_as(cands.size(), 0);
  size_t quantizing = 0;
  for (size_t c = 0; c < cands.size(); ++c)
    if (cands[c].config) measured_as[c] = quantizing++;
  const std::string cache_path =
      opts.cache_dir.empty() ? "" : opts.cache_dir + "/" + CacheKey(job, opts) + ".json";
  std::optional<FirstRound> first = cache_path.empty() ? std::nullopt : ReadCache(cache_path);
  const bool from_cache = first.has_value();
  const Assignment uniform(names.size(), cheapest);
  if (from_cache) {
    observer.OnLog(pipeline::LogLevel::kInfo,
                   "auto precision round 1 (every layer " + cands[cheapest].name +
                       "): sensitivities and metrics from the cache of an earlier job on the same "
                       "model, data and candidates");
  } else {
    std::vector<pipeline::LayerPlanner> alone(cands.size());
    for (size_t c = 0; c < cands.size(); ++c) {
      if (!cands[c].config) continue;
      config::QuantConfig one = job.quant_config;
      one.global_quant_config = *cands[c].config;
      alone[c] = job_spec::PlannerFor(one);
    }
    std::vector<pipeline::SensitivityCandidate> sensitivity;
    for (size_t c = 0; c < cands.size(); ++c) {
      if (!cands[c].config) continue;
      // Measured in the format the layer really takes as this candidate.
      pipeline::LayerPlanner planner = [&alone, &effective, &index, c](const std::string& name,
                                                                       const std::string& type) {
        auto it = index.find(name);
        if (it == index.end()) return pipeline::LayerPlan{};
        const int e = effective[it->second][c];
        return alone[e] ? alone[e](name, type) : pipeline::LayerPlan{};
      };
      sensitivity.push_back({cands[c].name, std::move(planner)});
    }
    JobOutcome r =
        run(ConfigOf(job.quant_config, cands, names, formats_of(uniform)),
            "round 1: every layer " + cands[cheapest].name, 1, false, std::move(sensitivity));
    if (!r.status.ok() || r.cancelled) return r;
    auto m = MeasuredOf(r.report, script);
    if (!m.ok()) return fail(m.status());
    FirstRound fr;
    fr.measured = *m;
    for (const auto& block : r.report.blocks)
      for (const auto& l : block.layers)
        if (l.sensitivity_relative_mse.size() == quantizing)
          fr.sensitivity[l.name] = l.sensitivity_relative_mse;
    if (!cache_path.empty()) WriteCache(cache_path, fr);
    first = std::move(fr);
  }

  // Each layer's cost and sensitivity per candidate, in the format it takes.
  // (A layer only "float" fits is not measured: it is float in every
  // assignment.)
  std::vector<SearchLayer> layers;
  for (size_t i = 0; i < names.size(); ++i) {
    const ModelLayer& m = model->layers[i];
    auto measured_values = first->sensitivity.find(names[i]);
    const bool have =
        measured_values != first->sensitivity.end() && measured_values->second.size() == quantizing;
    SearchLayer l;
    l.name = names[i];
    l.weights = m.Weights();
    for (size_t c = 0; c < cands.size(); ++c) {
      const int e = effective[i][c];
      if (cands[e].config && !have)
        return fail(InternalError("auto precision: no sensitivity was measured for " + names[i]));
      l.bytes.push_back(m.Bytes(cands[e], model->float_bits));
      if (!cost_per_weight.empty()) l.cost.push_back(cost_per_weight[e] * l.weights);
      l.sensitivity.push_back(cands[e].config ? measured_values->second[measured_as[c]] : 0.0);
    }
    layers.push_back(std::move(l));
  }
  if (layers.empty())
    return fail(FailedPreconditionError(
        "spec.auto_precision: the job quantizes no layer to search (is every layer "
        "excluded?)"));
  const PrecisionSearch search(std::move(layers));

  pipeline::AutoPrecisionReport report;
  report.candidates = opts.candidates;
  report.from_cache = from_cache;
  report.float_perplexity = first->measured.float_ppl;
  report.float_top1_accuracy = first->measured.float_top1;
  std::vector<Assignment> assignments;
  std::vector<Measured> measured;
  auto record = [&](const Assignment& a, const Measured& m, const Prediction* p) {
    pipeline::AutoPrecisionRound r;
    r.round = static_cast<int>(report.rounds.size()) + 1;
    r.weight_bytes = search.Bytes(a);
    r.bits_per_weight = search.BitsPerWeight(a);
    if (!cost_per_weight.empty()) r.cost = search.Cost(a);
    if (p != nullptr) {
      const double s = search.Sensitivity(a);
      r.predicted_perplexity_increase = p->Predict(0, s);
      r.predicted_kl_divergence = p->Predict(1, s);
      r.predicted_accuracy_drop = p->Predict(2, s);
    }
    r.perplexity = m.ppl;
    r.perplexity_increase = m.PplIncrease().value_or(0);
    r.kl_divergence_mean = m.kl;
    r.top1_accuracy = m.top1;
    r.accuracy_drop = m.AccuracyDrop();
    r.meets_budget = budget.Met(m);
    r.layers_per_candidate.assign(cands.size(), 0);
    for (int c : formats_of(a)) ++r.layers_per_candidate[c];
    observer.OnLog(
        pipeline::LogLevel::kInfo,
        RoundLine(r, m) + (r.meets_budget ? ": meets the budget" : ": misses the budget"));
    report.rounds.push_back(r);
    assignments.push_back(a);
    measured.push_back(m);
  };
  record(uniform, first->measured, nullptr);

  Prediction prediction;
  prediction.Learn(budget, first->measured, search.Sensitivity(uniform));
  // The cheapest round measured within the budget so far.
  auto smallest_met = [&]() {
    double best = std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < assignments.size(); ++i)
      if (report.rounds[i].meets_budget) best = std::min(best, search.Cost(assignments[i]));
    return best;
  };
  while (static_cast<int>(report.rounds.size()) < max_rounds) {
    const int round = static_cast<int>(report.rounds.size()) + 1;
    const bool met = budget.Met(measured.back());
    if (met && assignments.size() == 1) break;  // the cheapest candidate everywhere
    // After a miss, less sensitive than that round; after a round within
    // the budget, the prediction learned from it (it overestimated) may
    // find a smaller assignment.
    double target = prediction.Target(budget);
    if (!met)
      target = std::min(target, std::nextafter(search.Sensitivity(assignments.back()), 0.0));
    const Assignment next = search.CheapestWithin(target);
    const auto same =
        std::find_if(assignments.begin(), assignments.end(),
                     [&](const Assignment& a) { return formats_of(a) == formats_of(next); });
    const bool measured_before = same != assignments.end();
    if (met && (measured_before || search.Cost(next) >= smallest_met())) break;
    if (measured_before) {
      observer.OnLog(pipeline::LogLevel::kWarning,
                     "auto precision: the prediction proposes round " +
                         std::to_string(same - assignments.begin() + 1) +
                         "'s assignment again; the search ends after round " +
                         std::to_string(round - 1));
      break;
    }
    const config::QuantConfig cfg = ConfigOf(job.quant_config, cands, names, formats_of(next));
    JobOutcome r = run(cfg, "round " + std::to_string(round), round, false);
    if (!r.status.ok() || r.cancelled) return r;
    auto m = MeasuredOf(r.report, script);
    if (!m.ok()) return fail(m.status());
    record(next, *m, &prediction);
    prediction.Learn(budget, *m, search.Sensitivity(next));
  }

  // The cheapest round that met the budget, else the most accurate.
  int chosen = -1;
  for (size_t i = 0; i < measured.size(); ++i) {
    if (!report.rounds[i].meets_budget) continue;
    if (chosen < 0 || search.Cost(assignments[i]) < search.Cost(assignments[chosen]))
      chosen = static_cast<int>(i);
  }
  report.budget_met = chosen >= 0;
  if (chosen < 0) {
    chosen = 0;
    for (size_t i = 1; i < measured.size(); ++i)
      if (budget.Excess(measured[i]) < budget.Excess(measured[chosen]))
        chosen = static_cast<int>(i);
  }
  report.chosen_round = chosen + 1;
  // The frontier of (cost, error): perplexity, or a classifier's accuracy
  // drop.
  std::vector<std::pair<double, double>> points;
  for (size_t i = 0; i < measured.size(); ++i)
    points.emplace_back(search.Cost(assignments[i]),
                        script ? measured[i].AccuracyDrop().value_or(0) : measured[i].ppl);
  const std::vector<bool> pareto = ParetoFrontier(points);
  for (size_t i = 0; i < pareto.size(); ++i) report.rounds[i].pareto = pareto[i];
  const Assignment choice = formats_of(assignments[chosen]);
  for (size_t i = 0; i < choice.size(); ++i)
    report.layers.emplace_back(names[i], cands[choice[i]].name);
  const config::QuantConfig chosen_config = ConfigOf(job.quant_config, cands, names, choice);
  report.quark_json = config::WriteQuarkJson(chosen_config);
  observer.OnLog(report.budget_met ? pipeline::LogLevel::kInfo : pipeline::LogLevel::kWarning,
                 report.budget_met
                     ? "auto precision: round " + std::to_string(chosen + 1) +
                           " is the cheapest that meets the budget; quantizing and exporting it"
                     : "auto precision: no round met the budget; the most accurate, round " +
                           std::to_string(chosen + 1) + ", is quantized and exported");

  JobOutcome final =
      run(chosen_config, "chosen (round " + std::to_string(chosen + 1) + ")", chosen + 1, true);
  final.report.auto_precision = std::move(report);
  return final;
}

}  // namespace quantd::precision
