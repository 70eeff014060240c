#include "worker/config/quark_json.h"

#include <set>
#include <utility>
#include <vector>

#include "nlohmann/json.hpp"
#include "worker/common/bounded_json.h"
#include "worker/config/quark_json_canonical.h"
#include "worker/config/quark_json_record.h"

namespace quantd::config {
namespace {

using quark::Json;
using quark::kRoles;
using quark::RoleField;
using quant::DataType;
using quant::MxScaleMode;
using quant::ObserverType;
using quant::QScheme;
using quant::RoundMethod;
using quant::ScaleType;
using quant::ZeroPointType;

quant::TensorRole RoleOf(const std::string& role) {
  if (role == "input_tensors") return quant::TensorRole::kInput;
  if (role == "output_tensors") return quant::TensorRole::kOutput;
  if (role == "weight") return quant::TensorRole::kWeight;
  return quant::TensorRole::kBias;
}

// ---------------------------------------------------------------------------
// Reference JSON -> engine
// ---------------------------------------------------------------------------

class Parser {
 public:
  Parser(const std::string& prefix, std::vector<FieldViolation>* out)
      : prefix_(prefix), out_(out) {}

  void Add(const std::string& path, std::string what) {
    out_->push_back({prefix_ + path, std::move(what)});
  }

  std::optional<std::string> String(const Json& j, const char* key, const std::string& path) {
    if (!j.contains(key) || j.at(key).is_null()) return std::nullopt;
    if (!j.at(key).is_string()) {
      Add(path + "." + key, "expected a string");
      return std::nullopt;
    }
    return j.at(key).get<std::string>();
  }

  std::optional<bool> Bool(const Json& j, const char* key, const std::string& path) {
    if (!j.contains(key) || j.at(key).is_null()) return std::nullopt;
    if (!j.at(key).is_boolean()) {
      Add(path + "." + key, "expected true or false");
      return std::nullopt;
    }
    return j.at(key).get<bool>();
  }

  std::optional<int> Int(const Json& j, const char* key, const std::string& path) {
    if (!j.contains(key) || j.at(key).is_null()) return std::nullopt;
    if (!j.at(key).is_number_integer()) {
      Add(path + "." + key, "expected an integer");
      return std::nullopt;
    }
    return j.at(key).get<int>();
  }

  std::optional<double> Number(const Json& j, const char* key, const std::string& path) {
    if (!j.contains(key) || j.at(key).is_null()) return std::nullopt;
    if (!j.at(key).is_number()) {
      Add(path + "." + key, "expected a number");
      return std::nullopt;
    }
    return j.at(key).get<double>();
  }

  // A spec object; nullopt (with violations) when it cannot be built.
  std::optional<QuantSpec> Spec(const Json& j, const std::string& path, quant::TensorRole role) {
    if (j.is_array()) {
      Add(path, "a list of specs (two-stage progressive or scale quantization) is not supported");
      return std::nullopt;
    }
    if (!j.is_object()) {
      Add(path, "expected a quantization spec object or null");
      return std::nullopt;
    }
    const size_t before = out_->size();
    QuantSpec s;
    const std::optional<std::string> dtype = String(j, "dtype", path);
    const std::optional<std::string> qscheme = String(j, "qscheme", path);
    const std::optional<std::string> scale_format = String(j, "scale_format", path);
    const std::optional<std::string> observer = String(j, "observer_cls", path);
    const std::optional<std::string> element = String(j, "mx_element_dtype", path);
    // An unread dtype or qscheme does not stop the other checks of the spec
    // (quant::ValidatePartialSpec): every independent mistake is named.
    bool dtype_known = true;
    bool qscheme_known = true;
    if (!dtype) {
      Add(path + ".dtype", "dtype is required");
      dtype_known = false;
    }
    const bool per_group = qscheme && *qscheme == "per_group";
    const bool e8m0 = scale_format && *scale_format == "e8m0";
    const bool mx_observer = observer && *observer == "PerBlockMXObserver";
    if (!dtype) {
    } else if (*dtype == "mx") {
      std::optional<DataType> t = element ? quant::MxTypeFromElementName(*element) : std::nullopt;
      if (!t) {
        Add(path + ".mx_element_dtype",
            "dtype \"mx\" needs mx_element_dtype fp8_e4m3, fp8_e5m2, fp6_e3m2, fp6_e2m3, fp4 or "
            "int8; got " +
                (element ? "'" + *element + "'" : std::string("none")));
        dtype_known = false;
      } else {
        s.dtype = *t;
      }
    } else if (*dtype == "fp4" || *dtype == "fp6_e2m3" || *dtype == "fp6_e3m2") {
      if (scale_format && !e8m0) {
        Add(path + ".scale_format", *dtype + " with scale_format '" + *scale_format +
                                        "' (non-MX scales) is not supported; the MX formats use "
                                        "e8m0");
        dtype_known = false;
      } else {
        s.dtype = *quant::MxTypeFromElementName(*dtype);
      }
    } else if ((*dtype == "fp8_e4m3" || *dtype == "fp8_e5m2") && per_group &&
               (e8m0 || mx_observer)) {
      s.dtype = *quant::MxTypeFromElementName(*dtype);
    } else if (std::optional<DataType> t = quant::DataTypeFromName(*dtype)) {
      s.dtype = *t;
    } else {
      Add(path + ".dtype", "unknown dtype '" + *dtype + "'; supported: " +
                               quant::AllDataTypeNames() + ", fp4, fp6_e2m3, fp6_e3m2, mx");
      dtype_known = false;
    }
    const bool mx = dtype_known && quant::IsMxType(s.dtype);
    if (qscheme) {
      if (std::optional<QScheme> q = quant::QSchemeFromName(*qscheme)) {
        s.qscheme = *q;
      } else {
        Add(path + ".qscheme", "unsupported qscheme '" + *qscheme +
                                   "'; supported: per_tensor, per_channel, per_group");
        qscheme_known = false;
      }
    } else if (mx) {
      s.qscheme = QScheme::kPerGroup;
    }
    // quark < 1.0 wrote "axis" and "dynamic".
    if (std::optional<int> a = Int(j, "ch_axis", path)) {
      s.ch_axis = a;
    } else if (std::optional<int> legacy = Int(j, "axis", path)) {
      s.ch_axis = legacy;
    }
    s.group_size = Int(j, "group_size", path);
    // null in the reference for the MX formats and the casts (symmetric by
    // definition); an explicit false stays and fails validation.
    const std::optional<bool> symmetric = Bool(j, "symmetric", path);
    if (symmetric) s.symmetric = *symmetric;
    if (std::optional<bool> dyn = Bool(j, "is_dynamic", path)) {
      s.is_dynamic = *dyn;
    } else if (std::optional<bool> legacy = Bool(j, "dynamic", path)) {
      s.is_dynamic = *legacy;
    }
    if (std::optional<std::string> r = String(j, "round_method", path)) {
      if (std::optional<RoundMethod> m = quant::RoundMethodFromName(*r)) {
        s.round_method = *m;
      } else {
        Add(path + ".round_method",
            "unknown round_method '" + *r + "'; supported: half_even, round, floor");
      }
    }
    if (std::optional<std::string> st = String(j, "scale_type", path)) {
      if (std::optional<ScaleType> t = quant::ScaleTypeFromName(*st)) {
        s.scale_type = *t;
      } else if (!(mx && *st == "float8_e8m0fnu")) {
        Add(path + ".scale_type", "unsupported scale_type '" + *st +
                                      "'; supported: float, float32, float16, bfloat16, pof2");
      }
    }
    if (observer) {
      static const std::set<std::string> kMinMax = {
          "PerTensorMinMaxObserver", "PerChannelMinMaxObserver",      "PerGroupMinMaxObserver",
          "PerBlockMXObserver",      "PerBlockMXBufferReuseObserver", "PlaceholderObserver"};
      if (*observer == "PerTensorPercentileObserver") {
        s.observer = ObserverType::kPercentile;
      } else if (*observer == "PerTensorMSEObserver") {
        s.observer = ObserverType::kMse;
      } else if (!kMinMax.count(*observer)) {
        Add(path + ".observer_cls",
            "unsupported observer_cls '" + *observer +
                "'; supported: PerTensorMinMaxObserver, PerChannelMinMaxObserver, "
                "PerGroupMinMaxObserver, PerBlockMXObserver, PerTensorPercentileObserver, "
                "PerTensorMSEObserver, PlaceholderObserver");
      }
    }
    if (std::optional<std::string> mode = String(j, "scale_calculation_mode", path)) {
      if (std::optional<MxScaleMode> m = quant::MxScaleModeFromName(*mode)) {
        s.mx_scale_mode = *m;
      } else {
        Add(path + ".scale_calculation_mode",
            "unknown scale_calculation_mode '" + *mode + "'; supported: even, floor, ceil");
      }
    }
    if (std::optional<std::string> zp = String(j, "zero_point_type", path)) {
      if (std::optional<ZeroPointType> z = quant::ZeroPointTypeFromName(*zp)) {
        s.zero_point_type = *z;
      } else {
        Add(path + ".zero_point_type",
            "unknown zero_point_type '" + *zp + "'; supported: int32, float32");
      }
    }
    s.percentile = Number(j, "percentile", path);
    if (std::optional<bool> scale_quant = Bool(j, "is_scale_quant", path);
        scale_quant && *scale_quant) {
      Add(path + ".is_scale_quant", "quantizing the scales of another spec is not supported");
    }
    if (out_->size() == before) return s;  // validated with the config
    // Not usable; still name the rest of its mistakes, once per field.
    std::vector<FieldViolation> more;
    quant::ValidatePartialSpec(s, role, prefix_ + path, dtype_known, qscheme_known, &more);
    for (FieldViolation& f : more) {
      const size_t dot = f.field.rfind('.');
      const std::string name = f.field.substr(dot + 1);
      if (name == "observer") f.field = f.field.substr(0, dot + 1) + "observer_cls";
      if (name == "mx_scale_mode") f.field = f.field.substr(0, dot + 1) + "scale_calculation_mode";
      bool seen = false;
      for (size_t i = before; i < out_->size(); ++i) seen = seen || (*out_)[i].field == f.field;
      if (!seen) out_->push_back(std::move(f));
    }
    return std::nullopt;
  }

  LayerQuantConfig Layer(const Json& j, const std::string& path) {
    LayerQuantConfig c;
    if (j.is_null()) return c;
    if (!j.is_object()) {
      Add(path, "expected a layer config object with input_tensors, output_tensors, weight, bias");
      return c;
    }
    for (const char* role : kRoles) {
      if (!j.contains(role) || j.at(role).is_null()) continue;
      *RoleField(c, role) = Spec(j.at(role), path + "." + role, RoleOf(role));
    }
    return c;
  }

  // The one place where algo_config's keys map to the typed options; an
  // option read here is also written back by AlgoJson. Keys not read here
  // are kept for the round trip and get a "not used" note.
  std::optional<AlgorithmConfig> Algorithm(const Json& j, const std::string& path) {
    if (!j.is_object()) {
      Add(path, "expected an algorithm config object");
      return std::nullopt;
    }
    const std::optional<std::string> name = String(j, "name", path);
    AlgorithmConfig a;
    // Sets `*target` and marks `key` given when the source holds a value.
    auto given = [&a](const char* key, auto value, auto* target) {
      if (!value) return;
      *target = *value;
      a.given.insert(key);
    };
    if (!name) {
      Add(path + ".name", "the algorithm needs a name");
      return std::nullopt;
    } else if (*name == "gptq") {
      GptqOptions g;
      given("damp_percent", Number(j, "damp_percent", path), &g.damp_percent);
      given("block_size", Int(j, "block_size", path), &g.block_size);
      // The reference's defaults when a key is absent.
      g.act_order = Bool(j, "desc_act", path).value_or(true);
      g.static_groups = Bool(j, "static_groups", path).value_or(true);
      a.options = g;
    } else if (*name == "awq") {
      AwqOptions w;
      given("grid_size", Int(j, "grid_size", path), &w.grid);
      w.clip = !Bool(j, "skip_clip_search", path).value_or(false);
      given("clip_max_tokens", Int(j, "clip_max_tokens", path), &w.clip_max_tokens);
      given("model_decoder_layers", String(j, "model_decoder_layers", path),
            &w.model_decoder_layers);
      if (j.contains("scaling_layers") && !j.at("scaling_layers").is_null()) {
        const Json& list = j.at("scaling_layers");
        if (!list.is_array()) {
          Add(path + ".scaling_layers",
              "expected a list of {prev_op, layers, inp, module2inspect} objects");
        } else {
          for (size_t i = 0; i < list.size(); ++i) {
            const std::string at = path + ".scaling_layers[" + std::to_string(i) + "]";
            if (!list[i].is_object()) {
              Add(at, "expected an object with prev_op, layers, inp, module2inspect");
              continue;
            }
            AwqScalingGroup l;
            l.prev_op = String(list[i], "prev_op", at).value_or("");
            l.inp = String(list[i], "inp", at).value_or("");
            l.module2inspect = String(list[i], "module2inspect", at).value_or("");
            const Json& layers = list[i].contains("layers") ? list[i].at("layers") : Json();
            if (layers.is_null()) {
              // empty: validation names it
            } else if (!layers.is_array()) {
              Add(at + ".layers", "expected a list of linear names (\"mlp.gate_proj\")");
            } else {
              for (const Json& name : layers) {
                if (name.is_string()) {
                  l.layers.push_back(name.get<std::string>());
                } else {
                  Add(at + ".layers", "expected a list of linear names (\"mlp.gate_proj\")");
                  break;
                }
              }
            }
            w.scaling_layers.push_back(std::move(l));
          }
        }
      }
      a.options = std::move(w);
    } else if (*name == "smooth" || *name == "smoothquant" || *name == "smooth_quant") {
      // "smooth" is the reference's name; the others are quantd's request names.
      SmoothQuantOptions s;
      given("alpha", Number(j, "alpha", path), &s.alpha);
      if (j.contains("layer_alpha") && j.at("layer_alpha").is_object()) {
        for (auto it = j.at("layer_alpha").begin(); it != j.at("layer_alpha").end(); ++it) {
          if (it.value().is_number()) {
            s.alpha_overrides.emplace_back(it.key(), it.value().get<double>());
          } else {
            Add(path + ".layer_alpha." + it.key(), "expected a number");
          }
        }
      }
      a.options = std::move(s);
    } else if (*name == "autosmoothquant" || *name == "auto_smooth_quant") {
      AutoSmoothQuantOptions as;
      given("alpha_step", Number(j, "alpha_step", path), &as.alpha_step);
      a.options = as;
    } else if (*name == "rotation" || *name == "quarot") {
      RotationOptions r;
      r.online_down_proj = Bool(j, "r4", path).value_or(*name == "quarot");
      if (j.contains("seed") && j.at("seed").is_number_unsigned()) {
        given("seed", std::optional<uint64_t>(j.at("seed").get<uint64_t>()), &r.seed);
      }
      a.options = r;
    } else {
      Add(path + ".name",
          "unsupported algorithm '" + *name +
              "'; supported: gptq, awq, smooth (smoothquant), autosmoothquant, rotation (quarot)");
      return std::nullopt;
    }
    return a;
  }

  QuantConfig Config(const Json& j) {
    QuantConfig c;
    if (j.contains("global_quant_config")) {
      c.global_quant_config = Layer(j.at("global_quant_config"), "global_quant_config");
    }
    if (j.contains("layer_type_quant_config") && !j.at("layer_type_quant_config").is_null()) {
      const Json& types = j.at("layer_type_quant_config");
      if (!types.is_object()) {
        Add("layer_type_quant_config", "expected an object of layer type -> layer config");
      } else {
        for (auto it = types.begin(); it != types.end(); ++it) {
          c.layer_type_quant_config.push_back(
              {it.key(), Layer(it.value(), "layer_type_quant_config." + it.key())});
        }
      }
    }
    for (const char* list : {"layer_quant_config", "kv_cache_quant_config"}) {
      if (!j.contains(list) || j.at(list).is_null()) continue;
      const Json& named = j.at(list);
      if (!named.is_object()) {
        Add(list, "expected an object of layer name glob -> layer config");
        continue;
      }
      auto& target = std::string(list) == "layer_quant_config" ? c.layer_quant_config
                                                               : c.kv_cache_quant_config;
      for (auto it = named.begin(); it != named.end(); ++it) {
        target.push_back({it.key(), Layer(it.value(), std::string(list) + "." + it.key())});
      }
    }
    if (j.contains("exclude") && !j.at("exclude").is_null()) {
      const Json& ex = j.at("exclude");
      if (!ex.is_array()) {
        Add("exclude", "expected a list of layer name globs");
      } else {
        for (size_t i = 0; i < ex.size(); ++i) {
          if (ex[i].is_string()) {
            c.exclude.push_back(ex[i].get<std::string>());
          } else {
            Add("exclude[" + std::to_string(i) + "]", "expected a string");
          }
        }
      }
    }
    if (j.contains("algo_config") && !j.at("algo_config").is_null()) {
      const Json& algos = j.at("algo_config");
      if (algos.is_array()) {
        for (size_t i = 0; i < algos.size(); ++i) {
          if (auto a = Algorithm(algos[i], "algo_config[" + std::to_string(i) + "]")) {
            c.algorithms.push_back(*a);
          }
        }
      } else if (auto a = Algorithm(algos, "algo_config")) {  // quark < 1.0: one object
        c.algorithms.push_back(*a);
      }
    }
    if (j.contains("export") && j.at("export").is_object()) {
      c.min_kv_scale = Number(j.at("export"), "min_kv_scale", "export").value_or(0.0);
    }
    return c;
  }

 private:
  std::string prefix_;
  std::vector<FieldViolation>* out_;
};

}  // namespace

StatusOr<QuantConfig> ParseQuarkJson(std::string_view text, const std::string& prefix) {
  const std::string field = prefix.empty() ? "quark_json" : prefix.substr(0, prefix.size() - 1);
  StatusOr<Json> parsed = ParseBoundedJson<Json>(text, JsonBounds{json_limits::kQuarkConfig},
                                                 "the quantization config");
  if (!parsed.ok()) {
    const std::string why = parsed.status().message();
    return InvalidArgumentError(why)
        .WithReason("INVALID_QUANT_CONFIG")
        .AddViolation(field, why.substr(std::string("the quantization config ").size()));
  }
  Json j = std::move(parsed).value();
  if (j.is_object() && j.contains("quantization_config") && !j.contains("global_quant_config")) {
    j = j.at("quantization_config");  // a whole config.json
  }
  if (!j.is_object()) {
    return InvalidArgumentError("the quantization config must be a JSON object")
        .WithReason("INVALID_QUANT_CONFIG");
  }
  std::vector<FieldViolation> violations;
  Parser parser(prefix, &violations);
  std::vector<std::string> notes;
  if (j.contains("quant_method") && j.at("quant_method").is_string()) {
    const std::string method = j.at("quant_method").get<std::string>();
    if (method == "quark_online") {
      // Quark 0.10 writes it for vLLM's online quantization; the config is
      // the same. quantd quantizes ahead of time, and what it exports is a
      // quantized model: "quark" (so the original is not kept).
      j["quant_method"] = "quark";
      notes.push_back(prefix + "quant_method: 'quark_online' is read as 'quark': quantd "
                               "quantizes the model ahead of time with this config, and its "
                               "exports say \"quark\"");
    } else if (method != "quark") {
      parser.Add("quant_method", "quant_method '" + method +
                                     "' is not the reference toolkit's (\"quark\" or "
                                     "\"quark_online\")");
    }
  }
  QuantConfig config = parser.Config(j);
  CollectViolations(config, PathStyle::kReferenceJson, prefix, &violations);
  if (!violations.empty()) return ViolationsStatus(std::move(violations));
  const Json record = quark::Diff(j, quark::ConfigJson(config));
  if (std::vector<FieldViolation> kept = quark::CheckKeptSize(record, prefix); !kept.empty()) {
    return ViolationsStatus(std::move(kept));
  }
  config.reference_json = record.is_null() ? "" : record.dump();
  for (const std::string& path : quark::UnusedKeys(record)) {
    notes.push_back(prefix + path +
                    ": not used by quantd (kept as written in exported configs, but it takes "
                    "no effect)");
  }
  config.notes = std::move(notes);
  return config;
}

namespace {

// Names in a config come from tenants (proto strings, CLI flags) and need not
// be valid UTF-8; nlohmann's dump() throws on such bytes. They are written
// as U+FFFD instead, so writing a config never throws (valid text is
// written byte for byte as before).
std::string Dump(const Json& j, int indent = -1) {
  return j.dump(indent, ' ', false, Json::error_handler_t::replace);
}

// The config's reference JSON value: the engine's fields, and what the
// original JSON held that they do not model.
Json WrittenJson(const QuantConfig& config) {
  Json j = quark::ConfigJson(config);
  if (!config.reference_json.empty()) {
    // Written by ParseQuarkJson from a value within kMaxJsonDepth: each
    // level of it is two levels of the record, plus the leaf's own.
    StatusOr<Json> record = ParseBoundedJson<Json>(
        config.reference_json,
        JsonBounds{config.reference_json.size(), 2 * kMaxJsonDepth + 2}, "reference_json");
    if (record.ok()) j = quark::Restore(j, *record);
  }
  return j;
}

}  // namespace

std::string WriteQuarkJson(const QuantConfig& config, int indent) {
  return Dump(WrittenJson(config), indent);
}

namespace {

Json ExportJson(const QuantConfig& config, const std::string& weight_format) {
  Json j = WrittenJson(config);
  if (!j.contains("export") || !j["export"].is_object()) j["export"] = Json::object();
  j["export"]["weight_format"] = weight_format;
  return j;
}

}  // namespace

std::string WriteQuarkJsonForExport(const QuantConfig& config, const std::string& weight_format,
                                    int indent) {
  return Dump(ExportJson(config, weight_format), indent);
}

nlohmann::json QuarkJsonForExport(const QuantConfig& config, const std::string& weight_format) {
  return nlohmann::json(ExportJson(config, weight_format));
}

std::string SpecToQuarkJson(const QuantSpec& spec) { return Dump(quark::SpecJson(spec)); }

}  // namespace quantd::config
