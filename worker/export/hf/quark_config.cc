#include "worker/export/hf/quark_config.h"

#include "worker/common/bounded_json.h"
#include "worker/common/name_pattern.h"

namespace quantd::exporter {

using nlohmann::json;
using quant::DataType;
using quant::QScheme;
using quant::QuantSpec;

namespace {

std::string ObserverClassName(const QuantSpec& s) {
  if (quant::IsMxType(s.dtype)) return "PerBlockMXObserver";
  switch (s.observer) {
    case quant::ObserverType::kPercentile:
      return "PerTensorPercentileObserver";
    case quant::ObserverType::kMse:
      return "PerTensorMSEObserver";
    case quant::ObserverType::kMinMax:
      break;
  }
  switch (s.qscheme) {
    case QScheme::kPerChannel:
      return "PerChannelMinMaxObserver";
    case QScheme::kPerGroup:
      return "PerGroupMinMaxObserver";
    case QScheme::kPerTensor:
      break;
  }
  return "PerTensorMinMaxObserver";
}

Status Bad(const std::string& path, const std::string& what) {
  Status s(StatusCode::kInvalidArgument, path + ": " + what, "INVALID_QUANT_CONFIG");
  s.AddViolation(path, what);
  return s;
}

// Reads an optional string field; nullopt when absent or null.
StatusOr<std::optional<std::string>> OptString(const json& j, const char* key,
                                               const std::string& path) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::optional<std::string>();
  if (!it->is_string()) return Bad(path + "." + key, "must be a string");
  return std::optional<std::string>(it->get<std::string>());
}

StatusOr<std::optional<int>> OptInt(const json& j, const char* key, const std::string& path) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::optional<int>();
  if (!it->is_number_integer()) return Bad(path + "." + key, "must be an integer");
  return std::optional<int>(it->get<int>());
}

StatusOr<std::optional<bool>> OptBool(const json& j, const char* key, const std::string& path) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::optional<bool>();
  if (!it->is_boolean()) return Bad(path + "." + key, "must be true or false");
  return std::optional<bool>(it->get<bool>());
}

StatusOr<QuarkLayerSpecs> ParseLayer(const json& j, const std::string& path) {
  QuarkLayerSpecs out;
  if (j.is_null()) return out;
  if (!j.is_object()) return Bad(path, "must be an object");
  QD_ASSIGN_OR_RETURN(out.weight, ParseQuarkSpec(j.value("weight", json()), path + ".weight"));
  QD_ASSIGN_OR_RETURN(out.bias, ParseQuarkSpec(j.value("bias", json()), path + ".bias"));
  QD_ASSIGN_OR_RETURN(out.input,
                      ParseQuarkSpec(j.value("input_tensors", json()), path + ".input_tensors"));
  QD_ASSIGN_OR_RETURN(out.output,
                      ParseQuarkSpec(j.value("output_tensors", json()), path + ".output_tensors"));
  return out;
}

StatusOr<std::vector<std::pair<std::string, QuarkLayerSpecs>>> ParseLayerMap(const json& root,
                                                                             const char* key) {
  std::vector<std::pair<std::string, QuarkLayerSpecs>> out;
  auto it = root.find(key);
  if (it == root.end() || it->is_null()) return out;
  if (!it->is_object()) return Bad(key, "must be an object");
  for (auto e = it->begin(); e != it->end(); ++e) {
    QD_ASSIGN_OR_RETURN(QuarkLayerSpecs specs,
                        ParseLayer(e.value(), std::string(key) + "." + e.key()));
    out.emplace_back(e.key(), std::move(specs));
  }
  return out;
}

}  // namespace

json QuarkSpecJson(const QuantSpec& s) {
  json j;
  const bool mx = quant::IsMxType(s.dtype);
  j["dtype"] = mx ? std::string(quant::ReferenceElementName(s.dtype))
                  : std::string(quant::DataTypeName(s.dtype));
  j["is_dynamic"] = s.is_dynamic;
  j["qscheme"] = mx ? "per_group" : std::string(quant::QSchemeName(s.qscheme));
  if (mx || s.qscheme != QScheme::kPerTensor) {
    j["ch_axis"] = quant::EffectiveChAxis(s);
  } else {
    j["ch_axis"] = nullptr;
  }
  if (mx) {
    j["group_size"] = quant::kMxBlockSize;
  } else if (s.group_size) {
    j["group_size"] = *s.group_size;
  } else {
    j["group_size"] = nullptr;
  }
  j["symmetric"] = s.symmetric;
  j["round_method"] = std::string(quant::RoundMethodName(s.round_method));
  j["scale_type"] = std::string(quant::ScaleTypeName(s.scale_type));
  j["scale_format"] = mx ? json("e8m0") : json();
  j["scale_calculation_mode"] =
      mx ? json(std::string(quant::MxScaleModeName(s.mx_scale_mode))) : json();
  j["mx_element_dtype"] = nullptr;
  j["observer_cls"] = ObserverClassName(s);
  j["is_scale_quant"] = false;
  j["zero_point_type"] = std::string(quant::ZeroPointTypeName(s.zero_point_type));
  if (s.percentile) j["percentile"] = *s.percentile;
  return j;
}

json QuarkExportJson(const QuarkExportSection& section) {
  return {{"kv_cache_group", section.kv_cache_group},
          {"min_kv_scale", section.min_kv_scale},
          {"pack_method", section.pack_method},
          {"weight_format", section.weight_format},
          {"weight_merge_groups", nullptr}};
}

json QuarkLayerJson(const QuarkLayerSpecs& specs) {
  auto one = [](const std::optional<QuantSpec>& s) { return s ? QuarkSpecJson(*s) : json(); };
  return json{{"input_tensors", one(specs.input)},
              {"output_tensors", one(specs.output)},
              {"weight", one(specs.weight)},
              {"bias", one(specs.bias)},
              {"target_device", nullptr}};
}

StatusOr<std::optional<QuantSpec>> ParseQuarkSpec(const json& j, const std::string& path) {
  if (j.is_null()) return std::optional<QuantSpec>();
  if (j.is_array()) {
    return Status(StatusCode::kUnimplemented,
                  path + ": a list of quantizers (sequential quantization) is not supported",
                  "FEATURE_NOT_BUILT");
  }
  if (!j.is_object()) return Bad(path, "must be an object or null");
  QuantSpec s;
  QD_ASSIGN_OR_RETURN(std::optional<std::string> dtype, OptString(j, "dtype", path));
  if (!dtype) return Bad(path + ".dtype", "is required");
  QD_ASSIGN_OR_RETURN(std::optional<std::string> scale_format, OptString(j, "scale_format", path));
  QD_ASSIGN_OR_RETURN(std::optional<std::string> element, OptString(j, "mx_element_dtype", path));
  std::optional<DataType> t;
  if (*dtype == "mx") {
    if (!element) return Bad(path + ".mx_element_dtype", "is required when dtype is mx");
    t = quant::MxTypeFromElementName(*element);
    if (!t) return Bad(path + ".mx_element_dtype", "unknown MX element dtype '" + *element + "'");
  } else if (scale_format && *scale_format == "e8m0") {
    t = quant::MxTypeFromElementName(*dtype);
    if (!t) return Bad(path + ".dtype", "'" + *dtype + "' has no MX form (scale_format e8m0)");
  } else {
    t = quant::DataTypeFromName(*dtype);
    if (!t) {
      return Bad(path + ".dtype",
                 "unknown dtype '" + *dtype + "' (accepted: " + quant::AllDataTypeNames() + ")");
    }
  }
  s.dtype = *t;
  const bool mx = quant::IsMxType(s.dtype);
  QD_ASSIGN_OR_RETURN(std::optional<std::string> qscheme, OptString(j, "qscheme", path));
  if (qscheme && !mx) {
    auto q = quant::QSchemeFromName(*qscheme);
    if (!q) return Bad(path + ".qscheme", "unknown qscheme '" + *qscheme + "'");
    s.qscheme = *q;
  }
  if (mx) s.qscheme = QScheme::kPerGroup;
  QD_ASSIGN_OR_RETURN(s.ch_axis, OptInt(j, "ch_axis", path));
  if (s.qscheme == QScheme::kPerTensor) s.ch_axis.reset();
  QD_ASSIGN_OR_RETURN(s.group_size, OptInt(j, "group_size", path));
  if (s.qscheme != QScheme::kPerGroup) s.group_size.reset();
  if (mx) s.group_size = quant::kMxBlockSize;
  QD_ASSIGN_OR_RETURN(std::optional<bool> symmetric, OptBool(j, "symmetric", path));
  if (symmetric) s.symmetric = *symmetric;
  if (mx) s.symmetric = true;
  QD_ASSIGN_OR_RETURN(std::optional<bool> dynamic, OptBool(j, "is_dynamic", path));
  s.is_dynamic = dynamic.value_or(false);
  QD_ASSIGN_OR_RETURN(std::optional<std::string> round, OptString(j, "round_method", path));
  if (round) {
    auto r = quant::RoundMethodFromName(*round);
    if (!r) return Bad(path + ".round_method", "unknown round method '" + *round + "'");
    s.round_method = *r;
  }
  QD_ASSIGN_OR_RETURN(std::optional<std::string> scale_type, OptString(j, "scale_type", path));
  if (scale_type) {
    auto st = quant::ScaleTypeFromName(*scale_type);
    if (!st) return Bad(path + ".scale_type", "unknown scale type '" + *scale_type + "'");
    s.scale_type = *st;
  }
  QD_ASSIGN_OR_RETURN(std::optional<std::string> mode,
                      OptString(j, "scale_calculation_mode", path));
  if (mode && mx) {
    auto m = quant::MxScaleModeFromName(*mode);
    if (!m) return Bad(path + ".scale_calculation_mode", "unknown MX scale mode '" + *mode + "'");
    s.mx_scale_mode = *m;
  }
  QD_ASSIGN_OR_RETURN(std::optional<std::string> zp_type, OptString(j, "zero_point_type", path));
  if (zp_type) {
    auto z = quant::ZeroPointTypeFromName(*zp_type);
    if (!z) return Bad(path + ".zero_point_type", "unknown zero point type '" + *zp_type + "'");
    s.zero_point_type = *z;
  }
  QD_ASSIGN_OR_RETURN(std::optional<std::string> observer, OptString(j, "observer_cls", path));
  if (observer) {
    if (observer->find("Percentile") != std::string::npos) {
      s.observer = quant::ObserverType::kPercentile;
    } else if (observer->find("MSE") != std::string::npos ||
               observer->find("Mse") != std::string::npos) {
      s.observer = quant::ObserverType::kMse;
    }
  }
  if (auto it = j.find("percentile"); it != j.end() && it->is_number()) {
    s.percentile = it->get<double>();
  }
  return std::optional<QuantSpec>(s);
}

bool QuarkGlobMatch(const std::string& pattern, const std::string& name) {
  return GlobMatch(pattern, name);
}

StatusOr<QuarkConfig> QuarkConfig::Parse(const std::string& json_text) {
  QuarkConfig c;
  // From a model's config.json: bounded like it.
  StatusOr<json> parsed = ParseBoundedJson(json_text, JsonBounds{json_limits::kModelConfig}, "it");
  if (!parsed.ok()) return Bad("quantization_config", parsed.status().message().substr(3));
  c.json_ = std::move(parsed).value();
  if (!c.json_.is_object()) return Bad("quantization_config", "is not a JSON object");
  const json& root = c.json_;
  QD_ASSIGN_OR_RETURN(c.global_,
                      ParseLayer(root.value("global_quant_config", json()), "global_quant_config"));
  QD_ASSIGN_OR_RETURN(c.by_type_, ParseLayerMap(root, "layer_type_quant_config"));
  QD_ASSIGN_OR_RETURN(c.by_name_, ParseLayerMap(root, "layer_quant_config"));
  if (auto it = root.find("exclude"); it != root.end() && !it->is_null()) {
    if (!it->is_array()) return Bad("exclude", "must be a list of globs");
    for (const auto& e : *it) {
      if (!e.is_string()) return Bad("exclude", "must be a list of globs");
      c.exclude_.push_back(e.get<std::string>());
    }
  }
  if (auto it = root.find("export"); it != root.end() && it->is_object()) {
    const json& e = *it;
    c.export_.weight_format = e.value("weight_format", c.export_.weight_format);
    if (e.contains("pack_method") && e["pack_method"].is_string())
      c.export_.pack_method = e["pack_method"].get<std::string>();
    if (e.contains("kv_cache_group") && e["kv_cache_group"].is_array()) {
      for (const auto& g : e["kv_cache_group"])
        if (g.is_string()) c.export_.kv_cache_group.push_back(g.get<std::string>());
    }
    if (e.contains("min_kv_scale") && e["min_kv_scale"].is_number())
      c.export_.min_kv_scale = e["min_kv_scale"].get<double>();
  }
  return c;
}

bool QuarkConfig::Excluded(const std::string& name) const {
  for (const auto& p : exclude_) {
    // "re:" entries as config::ExcludeMatch reads them (RE2, anchored at
    // the start), so a config the exporter wrote reads back the same.
    if (p.compare(0, 3, "re:") == 0) {
      if (RegexMatchesPrefix(std::string_view(p).substr(3), name)) return true;
    } else if (QuarkGlobMatch(p, name) || QuarkGlobMatch(p + ".*", name)) {
      return true;
    }
  }
  return false;
}

QuarkLayerSpecs QuarkConfig::Resolve(const std::string& name, const std::string& type) const {
  if (Excluded(name)) return {};
  for (const auto& [pattern, specs] : by_name_) {
    if (QuarkGlobMatch(pattern, name)) return specs;
  }
  for (const auto& [t, specs] : by_type_) {
    if (t == type) return specs;
  }
  return global_;
}

}  // namespace quantd::exporter
