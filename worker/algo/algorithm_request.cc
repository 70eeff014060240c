#include "worker/algo/algorithm_request.h"

#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <utility>

namespace quantd::algo {
namespace {

using Json = nlohmann::json;

// Collects violations; the first message becomes the status message.
class Violations {
 public:
  void Add(const std::string& field, const std::string& description) {
    if (first_.empty()) first_ = field + ": " + description;
    list_.emplace_back(field, description);
  }
  bool empty() const { return list_.empty(); }
  Status ToStatus() const {
    // The count first, apart from the message (see job_spec_check.cc).
    std::string msg = list_.size() > 1
                          ? std::to_string(list_.size()) + " violations; the first: " + first_
                          : first_;
    Status s(StatusCode::kInvalidArgument, msg, "INVALID_JOB_SPEC");
    for (const auto& [f, d] : list_) s.AddViolation(f, d);
    return s;
  }

 private:
  std::string first_;
  std::vector<std::pair<std::string, std::string>> list_;
};

std::optional<AlgorithmKind> KindFromName(const std::string& name) {
  static const std::map<std::string, AlgorithmKind> kNames = {
      {"gptq", AlgorithmKind::kGptq},
      {"awq", AlgorithmKind::kAwq},
      {"smoothquant", AlgorithmKind::kSmoothQuant},
      {"smooth_quant", AlgorithmKind::kSmoothQuant},
      {"smooth", AlgorithmKind::kSmoothQuant},
      {"autosmoothquant", AlgorithmKind::kAutoSmoothQuant},
      {"auto_smooth_quant", AlgorithmKind::kAutoSmoothQuant},
      {"rotation", AlgorithmKind::kRotation},
      {"quarot", AlgorithmKind::kRotation},
  };
  auto it = kNames.find(name);
  if (it == kNames.end()) return std::nullopt;
  return it->second;
}

// The reference config's layout keys (see the header).
bool IsLayoutKey(const std::string& key) {
  static const std::set<std::string> kKeys = {"name",
                                              "model_decoder_layers",
                                              "inside_layer_modules",
                                              "scaling_layers",
                                              "embedding_layers",
                                              "output_layers",
                                              "backbone",
                                              "num_attention_heads",
                                              "num_key_value_heads",
                                              "v_proj",
                                              "o_proj",
                                              "self_attn",
                                              "mlp"};
  return kKeys.count(key) > 0;
}

// Reads one option; each setter reports its own violation.
class OptionReader {
 public:
  OptionReader(Violations& v, std::string field) : v_(v), field_(std::move(field)) {}

  void Number(const Json& j, double lo, double hi, bool lo_open, bool hi_open, double* out) {
    if (!j.is_number()) return Bad("must be a number");
    const double x = j.get<double>();
    const bool ok =
        std::isfinite(x) && (lo_open ? x > lo : x >= lo) && (hi_open ? x < hi : x <= hi);
    if (!ok) {
      return Bad("must be in " + std::string(lo_open ? "(" : "[") + Fmt(lo) + ", " + Fmt(hi) +
                 (hi_open ? ")" : "]") + ", got " + j.dump());
    }
    *out = x;
  }
  template <typename Int>
  void Integer(const Json& j, int64_t lo, Int* out) {
    if (!j.is_number_integer()) return Bad("must be an integer");
    const int64_t x = j.get<int64_t>();
    if (x < lo) return Bad("must be at least " + std::to_string(lo) + ", got " + j.dump());
    *out = static_cast<Int>(x);
  }
  void Unsigned(const Json& j, uint64_t* out) {
    if (!j.is_number_integer() ||
        (j.is_number_integer() && !j.is_number_unsigned() && j.get<int64_t>() < 0))
      return Bad("must be a non-negative integer");
    *out = j.get<uint64_t>();
  }
  void Bool(const Json& j, bool* out) {
    if (!j.is_boolean()) return Bad("must be true or false");
    *out = j.get<bool>();
  }
  void Bad(const std::string& description) { v_.Add(field_, description); }

 private:
  static std::string Fmt(double x) {
    std::string s = std::to_string(x);
    while (s.size() > 1 && s.back() == '0') s.pop_back();
    if (!s.empty() && s.back() == '.') s.pop_back();
    return s;
  }
  Violations& v_;
  std::string field_;
};

using Setter = std::function<void(const Json&, OptionReader&, ParsedAlgorithm&)>;

const std::map<std::string, Setter>& SettersFor(AlgorithmKind kind) {
  static const std::map<std::string, Setter> kGptq = [] {
    std::map<std::string, Setter> m;
    m["damp_percent"] = [](const Json& j, OptionReader& r, ParsedAlgorithm& p) {
      r.Number(j, 0, 1, true, true, &p.gptq.damp_percent);
    };
    m["block_size"] = [](const Json& j, OptionReader& r, ParsedAlgorithm& p) {
      r.Integer(j, 1, &p.gptq.block_size);
    };
    m["blocksize"] = m["block_size"];
    m["act_order"] = [](const Json& j, OptionReader& r, ParsedAlgorithm& p) {
      r.Bool(j, &p.gptq.act_order);
    };
    m["desc_act"] = m["act_order"];
    m["static_groups"] = [](const Json& j, OptionReader& r, ParsedAlgorithm& p) {
      r.Bool(j, &p.gptq.static_groups);
    };
    return m;
  }();
  static const std::map<std::string, Setter> kAwq = [] {
    std::map<std::string, Setter> m;
    m["grid_size"] = [](const Json& j, OptionReader& r, ParsedAlgorithm& p) {
      r.Integer(j, 2, &p.awq.grid);
    };
    m["n_grid"] = m["grid_size"];
    m["skip_clip_search"] = [](const Json& j, OptionReader& r, ParsedAlgorithm& p) {
      bool skip = !p.awq.clip;
      r.Bool(j, &skip);
      p.awq.clip = !skip;
    };
    m["clip_max_tokens"] = [](const Json& j, OptionReader& r, ParsedAlgorithm& p) {
      r.Integer(j, 1, &p.awq.clip_max_tokens);
    };
    m["max_shrink"] = [](const Json& j, OptionReader& r, ParsedAlgorithm& p) {
      r.Number(j, 0, 1, true, true, &p.awq.max_shrink);
    };
    m["model_decoder_layers"] = [](const Json& j, OptionReader& r, ParsedAlgorithm& p) {
      if (!j.is_string() || j.get<std::string>().empty())
        return r.Bad("must name the decoder layers' module list (\"model.layers\")");
      p.awq.model_decoder_layers = j.get<std::string>();
    };
    m["scaling_layers"] = [](const Json& j, OptionReader& r, ParsedAlgorithm& p) {
      const char* kShape =
          "must be a list of {\"prev_op\": NAME, \"layers\": [NAME, ...], \"inp\": NAME, "
          "\"module2inspect\": NAME} with names relative to a decoder layer";
      if (!j.is_array()) return r.Bad(kShape);
      std::vector<AwqScalingGroup> groups;
      for (const Json& e : j) {
        if (!e.is_object() || !e.contains("prev_op") || !e.at("prev_op").is_string() ||
            !e.contains("layers") || !e.at("layers").is_array() || e.at("layers").empty())
          return r.Bad(kShape);
        AwqScalingGroup g;
        g.prev_op = e.at("prev_op").get<std::string>();
        for (const Json& l : e.at("layers")) {
          if (!l.is_string()) return r.Bad(kShape);
          g.layers.push_back(l.get<std::string>());
        }
        for (const char* key : {"inp", "module2inspect"}) {
          if (!e.contains(key) || e.at(key).is_null()) continue;
          if (!e.at(key).is_string()) return r.Bad(kShape);
          (std::string(key) == "inp" ? g.inp : g.module2inspect) = e.at(key).get<std::string>();
        }
        groups.push_back(std::move(g));
      }
      p.awq.scaling_layers = std::move(groups);
    };
    return m;
  }();
  static const std::map<std::string, Setter> kSmooth = [] {
    std::map<std::string, Setter> m;
    m["alpha"] = [](const Json& j, OptionReader& r, ParsedAlgorithm& p) {
      r.Number(j, 0, 1, false, false, &p.smoothquant.alpha);
    };
    m["layer_alpha"] = [](const Json& j, OptionReader& r, ParsedAlgorithm& p) {
      if (!j.is_object()) return r.Bad("must be an object of layer name glob -> alpha");
      for (const auto& [glob, a] : j.items()) {
        if (glob.empty()) return r.Bad("a layer name glob must not be empty");
        if (!a.is_number() || !(a.get<double>() >= 0 && a.get<double>() <= 1))
          return r.Bad("alpha of '" + glob + "' must be a number in [0, 1]");
        p.smoothquant.alpha_overrides.emplace_back(glob, a.get<double>());
      }
    };
    m["scale_clamp_min"] = [](const Json& j, OptionReader& r, ParsedAlgorithm& p) {
      r.Number(j, 0, 1, true, false, &p.smoothquant.scale_clamp_min);
    };
    return m;
  }();
  static const std::map<std::string, Setter> kAutoSmooth = [] {
    std::map<std::string, Setter> m;
    m["alpha_step"] = [](const Json& j, OptionReader& r, ParsedAlgorithm& p) {
      r.Number(j, 0, 1, true, false, &p.autosmoothquant.alpha_step);
    };
    m["alpha_min"] = [](const Json& j, OptionReader& r, ParsedAlgorithm& p) {
      r.Number(j, 0, 1, false, false, &p.autosmoothquant.alpha_min);
    };
    m["alpha_max"] = [](const Json& j, OptionReader& r, ParsedAlgorithm& p) {
      r.Number(j, 0, 1, false, false, &p.autosmoothquant.alpha_max);
    };
    m["max_search_samples"] = [](const Json& j, OptionReader& r, ParsedAlgorithm& p) {
      r.Integer(j, 0, &p.autosmoothquant.max_search_samples);
    };
    return m;
  }();
  static const std::map<std::string, Setter> kRotation = [] {
    std::map<std::string, Setter> m;
    m["seed"] = [](const Json& j, OptionReader& r, ParsedAlgorithm& p) {
      r.Unsigned(j, &p.rotation.seed);
    };
    m["online_hadamard"] = [](const Json& j, OptionReader& r, ParsedAlgorithm& p) {
      r.Bool(j, &p.rotation.online_down_proj);
    };
    m["online_had"] = m["online_hadamard"];
    m["r4"] = m["online_hadamard"];
    m["rotate_heads"] = [](const Json& j, OptionReader& r, ParsedAlgorithm& p) {
      r.Bool(j, &p.rotation.rotate_heads);
    };
    m["r2"] = m["rotate_heads"];
    return m;
  }();
  switch (kind) {
    case AlgorithmKind::kGptq:
      return kGptq;
    case AlgorithmKind::kAwq:
      return kAwq;
    case AlgorithmKind::kSmoothQuant:
      return kSmooth;
    case AlgorithmKind::kAutoSmoothQuant:
      return kAutoSmooth;
    case AlgorithmKind::kRotation:
      break;
  }
  return kRotation;
}

}  // namespace

const char* AlgorithmKindName(AlgorithmKind kind) {
  switch (kind) {
    case AlgorithmKind::kGptq:
      return "gptq";
    case AlgorithmKind::kAwq:
      return "awq";
    case AlgorithmKind::kSmoothQuant:
      return "smoothquant";
    case AlgorithmKind::kAutoSmoothQuant:
      return "autosmoothquant";
    case AlgorithmKind::kRotation:
      break;
  }
  return "rotation";
}

StatusOr<ParsedAlgorithms> ParseAlgorithmRequests(const std::vector<AlgorithmRequest>& requests,
                                                  const std::string& prefix) {
  Violations v;
  std::vector<ParsedAlgorithm> parsed;
  std::map<AlgorithmKind, size_t> seen;
  for (size_t i = 0; i < requests.size(); ++i) {
    const AlgorithmRequest& req = requests[i];
    const std::string field = prefix + "[" + std::to_string(i) + "]";
    std::optional<AlgorithmKind> kind = KindFromName(req.name);
    if (!kind) {
      v.Add(field + ".name", "unknown algorithm '" + req.name +
                                 "'; expected gptq, awq, smoothquant, autosmoothquant or rotation");
      continue;
    }
    if (auto it = seen.find(*kind); it != seen.end()) {
      v.Add(field + ".name", std::string(AlgorithmKindName(*kind)) + " is already algorithms[" +
                                 std::to_string(it->second) + "]");
      continue;
    }
    seen[*kind] = i;
    ParsedAlgorithm p;
    p.kind = *kind;
    p.index = i;
    if (!req.options.is_null() && !req.options.is_object()) {
      v.Add(field + ".options", "must be a JSON object");
      continue;
    }
    const auto& setters = SettersFor(*kind);
    if (req.options.is_object()) {
      for (const auto& [key, value] : req.options.items()) {
        const std::string key_field = field + ".options." + key;
        OptionReader reader(v, key_field);
        if (key == "true_sequential") {
          if (!value.is_boolean()) {
            reader.Bad("must be true or false");
          } else if (!value.get<bool>()) {
            return UnimplementedError(key_field +
                                      ": GPTQ and AWQ run in true-sequential order only");
          }
          continue;
        }
        if (key == "name") {
          if (!value.is_string() || KindFromName(value.get<std::string>()) != kind)
            reader.Bad("must name the same algorithm as " + field + ".name");
          continue;
        }
        auto it = setters.find(key);
        if (it == setters.end() && IsLayoutKey(key)) continue;
        if (it == setters.end()) {
          std::string known;
          for (const auto& [k, s] : setters) known += (known.empty() ? "" : ", ") + k;
          reader.Bad(std::string("unknown option of ") + AlgorithmKindName(*kind) +
                     " (known: " + known + ")");
          continue;
        }
        it->second(value, reader, p);
      }
    }
    if (*kind == AlgorithmKind::kAutoSmoothQuant &&
        p.autosmoothquant.alpha_min > p.autosmoothquant.alpha_max) {
      v.Add(field + ".options.alpha_min", "must not exceed alpha_max");
    }
    parsed.push_back(std::move(p));
  }
  if (seen.count(AlgorithmKind::kSmoothQuant) && seen.count(AlgorithmKind::kAutoSmoothQuant)) {
    const size_t later =
        std::max(seen[AlgorithmKind::kSmoothQuant], seen[AlgorithmKind::kAutoSmoothQuant]);
    v.Add(prefix + "[" + std::to_string(later) + "].name",
          "smoothquant and autosmoothquant both smooth the same layers; choose one");
  }
  if (!v.empty()) return v.ToStatus();

  ParsedAlgorithms out;
  const bool has_gptq = seen.count(AlgorithmKind::kGptq) > 0;
  for (ParsedAlgorithm& p : parsed) {
    if (p.kind == AlgorithmKind::kRotation) {
      out.rotation = p;
    } else if (p.kind != AlgorithmKind::kGptq) {
      if (p.kind == AlgorithmKind::kAwq && has_gptq) p.awq.quantize_weights = false;
      out.block_algorithms.push_back(p);
    }
  }
  for (ParsedAlgorithm& p : parsed)
    if (p.kind == AlgorithmKind::kGptq) out.block_algorithms.push_back(p);
  return out;
}

Status CheckAlgorithmRequests(const std::vector<AlgorithmRequest>& requests,
                              const std::string& field_prefix) {
  return ParseAlgorithmRequests(requests, field_prefix).status();
}

AlgorithmRequest ToAlgorithmRequest(const config::AlgorithmConfig& a) {
  using Kind = config::AlgorithmConfig::Kind;
  AlgorithmRequest r;
  Json& o = r.options;
  switch (a.kind) {
    case Kind::kGptq:
      r.name = "gptq";
      if (a.damp_percent) o["damp_percent"] = *a.damp_percent;
      if (a.block_size) o["block_size"] = *a.block_size;
      if (a.act_order) o["act_order"] = true;
      if (a.static_groups) o["static_groups"] = true;
      break;
    case Kind::kAwq:
      r.name = "awq";
      if (a.grid_size) o["grid_size"] = *a.grid_size;
      if (a.skip_clip_search) o["skip_clip_search"] = true;
      if (a.clip_max_tokens) o["clip_max_tokens"] = *a.clip_max_tokens;
      if (a.model_decoder_layers) o["model_decoder_layers"] = *a.model_decoder_layers;
      if (!a.scaling_layers.empty()) {
        Json list = Json::array();
        for (const config::AwqScalingLayer& l : a.scaling_layers) {
          Json e = {{"prev_op", l.prev_op}, {"layers", l.layers}};
          if (!l.inp.empty()) e["inp"] = l.inp;
          if (!l.module2inspect.empty()) e["module2inspect"] = l.module2inspect;
          list.push_back(e);
        }
        o["scaling_layers"] = list;
      }
      break;
    case Kind::kSmoothQuant:
      r.name = "smoothquant";
      if (a.alpha) o["alpha"] = *a.alpha;
      if (!a.layer_alpha.empty()) {
        Json m = Json::object();
        for (const auto& [glob, alpha] : a.layer_alpha) m[glob] = alpha;
        o["layer_alpha"] = m;
      }
      break;
    case Kind::kAutoSmoothQuant:
      r.name = "autosmoothquant";
      if (a.alpha_step) o["alpha_step"] = *a.alpha_step;
      break;
    case Kind::kRotation:
      r.name = "rotation";
      if (a.seed) o["seed"] = *a.seed;
      if (a.online_hadamard) o["online_hadamard"] = true;
      break;
  }
  return r;
}

std::vector<AlgorithmRequest> ToAlgorithmRequests(
    const std::vector<config::AlgorithmConfig>& algorithms) {
  std::vector<AlgorithmRequest> out;
  for (const auto& a : algorithms) out.push_back(ToAlgorithmRequest(a));
  return out;
}

}  // namespace quantd::algo
