#include "worker/config/quark_json_canonical.h"

#include <variant>

namespace quantd::config::quark {
namespace {

using quant::DataType;
using quant::ObserverType;
using quant::QScheme;
using quant::ZeroPointType;

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

}  // namespace

std::optional<QuantSpec>* RoleField(LayerQuantConfig& c, const std::string& role) {
  if (role == "input_tensors") return &c.input_tensors;
  if (role == "output_tensors") return &c.output_tensors;
  if (role == "weight") return &c.weight;
  return &c.bias;
}

const std::optional<QuantSpec>& RoleField(const LayerQuantConfig& c, const std::string& role) {
  return *RoleField(const_cast<LayerQuantConfig&>(c), role);
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
    // The reference toolkit's observer class for a plain cast, which
    // observes nothing; its exports name it, and so do ours.
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

}  // namespace quantd::config::quark
