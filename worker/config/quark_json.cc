#include "worker/config/quark_json.h"

#include <algorithm>
#include <functional>
#include <set>
#include <utility>
#include <vector>

#include "nlohmann/json.hpp"
#include "worker/common/bounded_json.h"

namespace quantd::config {
namespace {

using Json = nlohmann::ordered_json;
using quant::DataType;
using quant::MxScaleMode;
using quant::ObserverType;
using quant::QScheme;
using quant::RoundMethod;
using quant::ScaleType;
using quant::ZeroPointType;

constexpr const char* kRoles[] = {"input_tensors", "output_tensors", "weight", "bias"};

// What unknown keys may hold in all (see CheckKeptSize).
constexpr size_t kMaxKeptBytes = size_t{16} << 10;

std::optional<QuantSpec>* RoleField(LayerQuantConfig& c, const std::string& role) {
  if (role == "input_tensors") return &c.input_tensors;
  if (role == "output_tensors") return &c.output_tensors;
  if (role == "weight") return &c.weight;
  return &c.bias;
}

quant::TensorRole RoleOf(const std::string& role) {
  if (role == "input_tensors") return quant::TensorRole::kInput;
  if (role == "output_tensors") return quant::TensorRole::kOutput;
  if (role == "weight") return quant::TensorRole::kWeight;
  return quant::TensorRole::kBias;
}

const std::optional<QuantSpec>& RoleField(const LayerQuantConfig& c, const std::string& role) {
  return *RoleField(const_cast<LayerQuantConfig&>(c), role);
}

// ---------------------------------------------------------------------------
// Engine -> reference JSON (the canonical form)
// ---------------------------------------------------------------------------

std::string ObserverClass(const QuantSpec& s) {
  switch (s.observer) {
    case ObserverType::kPercentile:
      return "PerTensorPercentileObserver";
    case ObserverType::kMse:
      return "PerTensorMSEObserver";
    case ObserverType::kMinMax:
      break;
  }
  switch (s.qscheme) {
    case QScheme::kPerTensor:
      return "PerTensorMinMaxObserver";
    case QScheme::kPerChannel:
      return "PerChannelMinMaxObserver";
    case QScheme::kPerGroup:
      return "PerGroupMinMaxObserver";
  }
  return "PerTensorMinMaxObserver";
}

Json SpecJson(const QuantSpec& s) {
  Json j = Json::object();
  if (quant::IsCastType(s.dtype)) {
    j["dtype"] = std::string(quant::DataTypeName(s.dtype));
    for (const char* k :
         {"is_dynamic", "qscheme", "ch_axis", "group_size", "symmetric", "round_method",
          "scale_type", "scale_format", "scale_calculation_mode", "mx_element_dtype"}) {
      j[k] = nullptr;
    }
    j["observer_cls"] = "PlaceholderObserver";
    j["is_scale_quant"] = false;
    return j;
  }
  if (quant::IsMxType(s.dtype)) {
    const bool mxint = s.dtype == DataType::kMxInt8;
    j["dtype"] = mxint ? "mx" : std::string(quant::ReferenceElementName(s.dtype));
    j["is_dynamic"] = s.is_dynamic;
    j["qscheme"] = "per_group";
    j["ch_axis"] = quant::EffectiveChAxis(s);
    j["group_size"] = quant::kMxBlockSize;
    j["symmetric"] = nullptr;
    j["round_method"] = mxint ? Json(nullptr) : Json("half_even");
    j["scale_type"] = mxint ? Json(nullptr) : Json("float");
    j["scale_format"] = mxint ? Json(nullptr) : Json("e8m0");
    j["scale_calculation_mode"] = std::string(quant::MxScaleModeName(s.mx_scale_mode));
    j["mx_element_dtype"] = mxint ? Json("int8") : Json(nullptr);
    j["observer_cls"] = mxint ? Json(nullptr) : Json("PerBlockMXObserver");
    j["is_scale_quant"] = false;
    return j;
  }
  j["dtype"] = std::string(quant::DataTypeName(s.dtype));
  j["is_dynamic"] = s.is_dynamic;
  j["qscheme"] = std::string(quant::QSchemeName(s.qscheme));
  j["ch_axis"] = s.qscheme == QScheme::kPerTensor ? Json(nullptr) : Json(quant::EffectiveChAxis(s));
  j["group_size"] =
      s.qscheme == QScheme::kPerGroup && s.group_size ? Json(*s.group_size) : Json(nullptr);
  j["symmetric"] = s.symmetric;
  j["round_method"] = std::string(quant::RoundMethodName(s.round_method));
  j["scale_type"] = std::string(quant::ScaleTypeName(s.scale_type));
  j["scale_format"] = quant::IsFp8Type(s.dtype) && s.qscheme == QScheme::kPerGroup ? Json("float32")
                                                                                   : Json(nullptr);
  j["scale_calculation_mode"] = nullptr;
  j["mx_element_dtype"] = nullptr;
  j["observer_cls"] = ObserverClass(s);
  j["is_scale_quant"] = false;
  if (s.zero_point_type == ZeroPointType::kFloat32) j["zero_point_type"] = "float32";
  if (s.percentile) j["percentile"] = *s.percentile;
  return j;
}

Json LayerJson(const LayerQuantConfig& c) {
  Json j = Json::object();
  for (const char* role : kRoles) {
    const auto& spec = RoleField(c, role);
    j[role] = spec ? SpecJson(*spec) : Json(nullptr);
  }
  return j;
}

// The options a source may leave unset are written only when it set them
// (AlgorithmConfig::given).
Json AlgoJson(const AlgorithmConfig& a) {
  Json j = Json::object();
  if (const auto* g = std::get_if<GptqOptions>(&a.options)) {
    j["name"] = "gptq";
    if (a.Given("damp_percent")) j["damp_percent"] = g->damp_percent;
    if (a.Given("block_size")) j["block_size"] = g->block_size;
    j["desc_act"] = g->act_order;
    j["static_groups"] = g->static_groups;
  } else if (const auto* w = std::get_if<AwqOptions>(&a.options)) {
    j["name"] = "awq";
    if (a.Given("grid_size")) j["grid_size"] = w->grid;
    if (!w->clip) j["skip_clip_search"] = true;
    if (a.Given("clip_max_tokens")) j["clip_max_tokens"] = w->clip_max_tokens;
    if (a.Given("model_decoder_layers")) j["model_decoder_layers"] = w->model_decoder_layers;
    if (!w->scaling_layers.empty()) {
      Json list = Json::array();
      for (const AwqScalingGroup& l : w->scaling_layers) {
        Json e = Json::object();
        e["prev_op"] = l.prev_op;
        e["layers"] = l.layers;
        if (!l.inp.empty()) e["inp"] = l.inp;
        if (!l.module2inspect.empty()) e["module2inspect"] = l.module2inspect;
        list.push_back(e);
      }
      j["scaling_layers"] = list;
    }
  } else if (const auto* s = std::get_if<SmoothQuantOptions>(&a.options)) {
    j["name"] = "smooth";
    if (a.Given("alpha")) j["alpha"] = s->alpha;
    if (!s->alpha_overrides.empty()) {
      Json per_layer = Json::object();
      for (const auto& [glob, alpha] : s->alpha_overrides) per_layer[glob] = alpha;
      j["layer_alpha"] = per_layer;
    }
  } else if (const auto* as = std::get_if<AutoSmoothQuantOptions>(&a.options)) {
    j["name"] = "autosmoothquant";
    if (a.Given("alpha_step")) j["alpha_step"] = as->alpha_step;
  } else if (const auto* r = std::get_if<RotationOptions>(&a.options)) {
    j["name"] = "rotation";
    j["r4"] = r->online_down_proj;
    if (a.Given("seed")) j["seed"] = r->seed;
  }
  return j;
}

Json ConfigJson(const QuantConfig& c) {
  Json j = Json::object();
  j["quant_method"] = "quark";
  j["global_quant_config"] = LayerJson(c.global_quant_config);
  Json types = Json::object();
  for (const auto& t : c.layer_type_quant_config) types[t.layer_type] = LayerJson(t.config);
  j["layer_type_quant_config"] = types;
  Json layers = Json::object();
  for (const auto& n : c.layer_quant_config) layers[n.pattern] = LayerJson(n.config);
  j["layer_quant_config"] = layers;
  Json kv = Json::object();
  Json kv_group = Json::array();
  for (const auto& n : c.kv_cache_quant_config) {
    kv[n.pattern] = LayerJson(n.config);
    kv_group.push_back(n.pattern);
  }
  j["kv_cache_quant_config"] = kv;
  j["exclude"] = c.exclude;
  if (c.algorithms.empty()) {
    j["algo_config"] = nullptr;
  } else {
    Json algos = Json::array();
    for (const auto& a : c.algorithms) algos.push_back(AlgoJson(a));
    j["algo_config"] = algos;
  }
  j["quant_mode"] = "eager_mode";
  j["export"] = Json{{"kv_cache_group", kv_group}, {"min_kv_scale", c.min_kv_scale}};
  return j;
}

// ---------------------------------------------------------------------------
// Preservation: what the original JSON held beyond the canonical form
// ---------------------------------------------------------------------------
//
// A record mirrors the JSON tree where the two differ: objects keep their
// original key order and per-key records, arrays of equal length per-item
// records, and a leaf keeps both the original and the canonical value (or
// their absence). Restoring puts the original back wherever the canonical
// value is still the one seen at parse time.

Json Diff(const Json& o, const Json& c) {
  if (o.is_object() && c.is_object()) {
    Json keys = Json::object();
    std::set<std::string> seen;
    for (auto it = o.begin(); it != o.end(); ++it) {
      seen.insert(it.key());
      if (c.contains(it.key())) {
        Json sub = Diff(it.value(), c.at(it.key()));
        if (!sub.is_null()) keys[it.key()] = sub;
      } else {
        keys[it.key()] = Json{{"leaf", true}, {"has_o", true}, {"o", it.value()}, {"has_c", false}};
      }
    }
    for (auto it = c.begin(); it != c.end(); ++it) {
      if (!seen.count(it.key())) {
        keys[it.key()] = Json{{"leaf", true}, {"has_o", false}, {"has_c", true}, {"c", it.value()}};
      }
    }
    Json order = Json::array();
    for (auto it = o.begin(); it != o.end(); ++it) order.push_back(it.key());
    Json c_order = Json::array();
    for (auto it = c.begin(); it != c.end(); ++it) {
      if (o.contains(it.key())) c_order.push_back(it.key());
    }
    if (keys.empty() && order == c_order) return nullptr;
    return Json{{"object", true}, {"order", order}, {"keys", keys}};
  }
  if (o.is_array() && c.is_array() && o.size() == c.size()) {
    Json items = Json::array();
    bool any = false;
    for (size_t i = 0; i < o.size(); ++i) {
      items.push_back(Diff(o[i], c[i]));
      any = any || !items.back().is_null();
    }
    return any ? Json{{"array", true}, {"items", items}} : Json(nullptr);
  }
  if (o == c) return nullptr;
  return Json{{"leaf", true}, {"has_o", true}, {"o", o}, {"has_c", true}, {"c", c}};
}

Json Restore(const Json& now, const Json& rec) {
  if (rec.is_null()) return now;
  if (rec.contains("leaf")) {
    return now == rec.at("c") ? rec.at("o") : now;
  }
  if (rec.contains("array")) {
    const Json& items = rec.at("items");
    if (!now.is_array() || now.size() != items.size()) return now;
    Json out = Json::array();
    for (size_t i = 0; i < now.size(); ++i) out.push_back(Restore(now[i], items[i]));
    return out;
  }
  if (!now.is_object()) return now;
  const Json& keys = rec.at("keys");
  Json values = Json::object();
  for (auto it = now.begin(); it != now.end(); ++it) {
    if (!keys.contains(it.key())) {
      values[it.key()] = it.value();
      continue;
    }
    const Json& r = keys.at(it.key());
    if (r.contains("leaf") && !r.at("has_o").get<bool>()) {
      // Written by the canonical form only: drop it while it is unchanged.
      if (r.at("has_c").get<bool>() && it.value() == r.at("c")) continue;
      values[it.key()] = it.value();
    } else if (r.contains("leaf") && !r.at("has_c").get<bool>()) {
      values[it.key()] = it.value();  // the engine writes this key now; keep its value
    } else {
      values[it.key()] = Restore(it.value(), r);
    }
  }
  for (auto it = keys.begin(); it != keys.end(); ++it) {
    const Json& r = it.value();
    if (r.contains("leaf") && r.at("has_o").get<bool>() && !r.at("has_c").get<bool>() &&
        !now.contains(it.key())) {
      values[it.key()] = r.at("o");  // only in the original
    }
  }
  Json out = Json::object();
  for (const Json& k : rec.at("order")) {
    const std::string key = k.get<std::string>();
    if (values.contains(key)) out[key] = values.at(key);
  }
  for (auto it = values.begin(); it != values.end(); ++it) {
    if (!out.contains(it.key())) out[it.key()] = it.value();
  }
  return out;
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

// Calls `visit(leaf, path, key)` for every leaf of a diff record, in the
// original's key order, with the path of the value it describes ("a.b[2]")
// and the key it sits under. An explicit stack: the record is as deep as the
// config, which the bounded parser limits but the walk need not recurse on.
void ForEachLeaf(const Json& record,
                 const std::function<void(const Json&, const std::string&, const std::string&)>&
                     visit) {
  struct Todo {
    const Json* rec;
    std::string path;
    std::string key;
  };
  std::vector<Todo> todo;
  if (!record.is_null()) todo.push_back({&record, "", ""});
  while (!todo.empty()) {
    const Todo t = std::move(todo.back());
    todo.pop_back();
    const Json& rec = *t.rec;
    if (rec.is_null()) continue;
    if (rec.contains("leaf")) {
      visit(rec, t.path, t.key);
    } else if (rec.contains("array")) {
      const Json& items = rec.at("items");
      for (size_t i = items.size(); i-- > 0;) {
        todo.push_back({&items[i], t.path + "[" + std::to_string(i) + "]", t.key});
      }
    } else {
      // Pushed in reverse so that they come out in the original's order;
      // keys only the engine's side has are leaves without an original.
      const Json& keys = rec.at("keys");
      const Json& order = rec.at("order");
      for (size_t i = order.size(); i-- > 0;) {
        const std::string key = order[i].get<std::string>();
        if (!keys.contains(key)) continue;
        todo.push_back({&keys.at(key), t.path.empty() ? key : t.path + "." + key, key});
      }
    }
  }
}

// The original values a record keeps (keys the engine does not model, and
// values it spells differently) may hold at most kMaxKeptBytes in all: they
// travel with the config into every export. Returns one violation per kept
// key, largest first, when they hold more.
std::vector<FieldViolation> CheckKeptSize(const Json& record, const std::string& prefix) {
  struct Kept {
    std::string path;
    size_t bytes;
  };
  std::vector<Kept> kept;
  size_t total = 0;
  ForEachLeaf(record, [&](const Json& leaf, const std::string& path, const std::string& key) {
    if (!leaf.at("has_o").get<bool>()) return;
    // The key and its value as written; not the path, which repeats the
    // layer globs above it.
    const size_t bytes = key.size() + leaf.at("o").dump().size();
    kept.push_back({path, bytes});
    total += bytes;
  });
  std::vector<FieldViolation> out;
  if (total <= kMaxKeptBytes) return out;
  std::sort(kept.begin(), kept.end(), [](const Kept& a, const Kept& b) {
    return a.bytes != b.bytes ? a.bytes > b.bytes : a.path < b.path;
  });
  constexpr size_t kNamed = 10;
  for (size_t i = 0; i < kept.size() && i < kNamed; ++i) {
    std::string why = "not modelled by quantd, so kept as written for the round trip (" +
                      std::to_string(kept[i].bytes) +
                      " bytes); such keys may hold at most " + std::to_string(kMaxKeptBytes) +
                      " bytes in all, this config's hold " + std::to_string(total);
    if (i + 1 == kNamed && kept.size() > kNamed) {
      why += " (and " + std::to_string(kept.size() - kNamed) + " smaller keys)";
    }
    out.push_back({prefix + kept[i].path, std::move(why)});
  }
  return out;
}

// The paths of the keys only the original holds (the engine does not model
// them), in the original's order; a null or false value asks for nothing,
// and keys that only describe ("version", a scaling entry's "help" and
// "has_kwargs") are left out.
std::vector<std::string> UnusedKeys(const Json& record) {
  static const std::set<std::string> kDescriptive = {"version", "help", "has_kwargs"};
  std::vector<std::string> out;
  ForEachLeaf(record, [&](const Json& leaf, const std::string& path, const std::string& key) {
    if (leaf.at("has_o").get<bool>() && !leaf.at("has_c").get<bool>() &&
        !kDescriptive.count(key) && !leaf.at("o").is_null() && leaf.at("o") != Json(false)) {
      out.push_back(path);
    }
  });
  return out;
}

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
  const Json record = Diff(j, ConfigJson(config));
  if (std::vector<FieldViolation> kept = CheckKeptSize(record, prefix); !kept.empty()) {
    return ViolationsStatus(std::move(kept));
  }
  config.reference_json = record.is_null() ? "" : record.dump();
  for (const std::string& path : UnusedKeys(record)) {
    notes.push_back(prefix + path +
                    ": not used by quantd (kept as written in exported configs, but it takes "
                    "no effect)");
  }
  config.notes = std::move(notes);
  return config;
}

std::string WriteQuarkJson(const QuantConfig& config, int indent) {
  Json j = ConfigJson(config);
  if (!config.reference_json.empty()) {
    // Written by ParseQuarkJson from a value within kMaxJsonDepth: each
    // level of it is two levels of the record, plus the leaf's own.
    StatusOr<Json> record = ParseBoundedJson<Json>(
        config.reference_json,
        JsonBounds{config.reference_json.size(), 2 * kMaxJsonDepth + 2}, "reference_json");
    if (record.ok()) j = Restore(j, *record);
  }
  return j.dump(indent);
}

std::string SpecToQuarkJson(const QuantSpec& spec) { return SpecJson(spec).dump(); }

}  // namespace quantd::config
