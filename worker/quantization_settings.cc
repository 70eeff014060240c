#include "worker/quantization_settings.h"

#include <fnmatch.h>

#include <map>
#include <nlohmann/json.hpp>
#include <vector>

namespace quantd::worker {
namespace {

using quant::DataType;
using quant::QScheme;
using quant::QuantSpec;

// The weight-only presets, as the reference toolkit defines them.
std::optional<QuantSpec> PresetWeightSpec(const std::string& name, int group_size) {
  QuantSpec s;
  if (name == "w_int8_per_tensor_sym") {
    s.dtype = DataType::kInt8;
    s.qscheme = QScheme::kPerTensor;
  } else if (name == "w_int8_per_channel_sym") {
    s.dtype = DataType::kInt8;
    s.qscheme = QScheme::kPerChannel;
    s.ch_axis = 0;
  } else if (name == "w_int4_per_channel_sym") {
    s.dtype = DataType::kInt4;
    s.qscheme = QScheme::kPerChannel;
    s.ch_axis = 0;
  } else if (name == "w_uint4_per_channel_asym") {
    s.dtype = DataType::kUInt4;
    s.qscheme = QScheme::kPerChannel;
    s.ch_axis = 0;
    s.symmetric = false;
  } else if (name == "w_int4_per_group_sym") {
    s.dtype = DataType::kInt4;
    s.qscheme = QScheme::kPerGroup;
    s.ch_axis = 1;
    s.group_size = group_size;
  } else if (name == "w_uint4_per_group_asym") {
    s.dtype = DataType::kUInt4;
    s.qscheme = QScheme::kPerGroup;
    s.ch_axis = 1;
    s.group_size = group_size;
    s.symmetric = false;
  } else {
    return std::nullopt;
  }
  return s;
}

// fnmatch where `p` also matches everything under `p.`.
bool MatchesExclude(const std::string& name, const std::vector<std::string>& globs) {
  for (const auto& g : globs) {
    if (fnmatch(g.c_str(), name.c_str(), 0) == 0) return true;
    if (fnmatch((g + ".*").c_str(), name.c_str(), 0) == 0) return true;
  }
  return false;
}

nlohmann::json SpecJson(const QuantSpec& s) {
  nlohmann::json j;
  j["dtype"] = std::string(quant::DataTypeName(s.dtype));
  j["qscheme"] = std::string(quant::QSchemeName(s.qscheme));
  j["ch_axis"] = s.ch_axis ? nlohmann::json(*s.ch_axis) : nlohmann::json(nullptr);
  j["group_size"] = s.group_size ? nlohmann::json(*s.group_size) : nlohmann::json(nullptr);
  j["symmetric"] = s.symmetric;
  j["is_dynamic"] = s.is_dynamic;
  j["round_method"] = std::string(quant::RoundMethodName(s.round_method));
  j["scale_type"] = std::string(quant::ScaleTypeName(s.scale_type));
  return j;
}

}  // namespace

StatusOr<ResolvedQuantization> ResolveQuantization(const quantd::v1::QuantizationSettings& q) {
  if (q.source_case() != quantd::v1::QuantizationSettings::kScheme)
    return Status(StatusCode::kUnimplemented, "spec.quantization: only preset schemes run today",
                  "FEATURE_NOT_BUILT");
  const int group_size = q.has_group_size() ? q.group_size() : 128;
  std::optional<QuantSpec> weight = PresetWeightSpec(q.scheme(), group_size);
  if (!weight) {
    Status s(StatusCode::kInvalidArgument, "unknown scheme '" + q.scheme() + "'",
             "INVALID_JOB_SPEC");
    s.AddViolation("spec.quantization.scheme", "unknown scheme '" + q.scheme() + "'");
    return s;
  }
  // The reference leaves lm_head in float by default.
  std::vector<std::string> exclude = {"lm_head"};
  for (const auto& e : q.exclude()) exclude.push_back(e);

  ResolvedQuantization r;
  r.planner = [w = *weight, exclude](const std::string& name, const std::string& type) {
    pipeline::LayerPlan p;
    if (type == "Linear" && !MatchesExclude(name, exclude)) p.weight = w;
    return p;
  };
  nlohmann::json cfg;
  cfg["quant_method"] = "quark";
  cfg["global_quant_config"] = {{"weight", SpecJson(*weight)},
                                {"input_tensors", nullptr},
                                {"output_tensors", nullptr},
                                {"bias", nullptr}};
  cfg["exclude"] = exclude;
  cfg["layer_quant_config"] = nlohmann::json::object();
  cfg["layer_type_quant_config"] = nlohmann::json::object();
  cfg["kv_cache_quant_config"] = nlohmann::json::object();
  cfg["algo_config"] = nullptr;
  cfg["quant_mode"] = "eager_mode";
  cfg["export"] = {{"weight_format", "fake_quantized"}};
  r.quark_json = cfg.dump();
  r.description = q.scheme();
  if (weight->qscheme == QScheme::kPerGroup)
    r.description += " (group " + std::to_string(group_size) + ")";
  return r;
}

}  // namespace quantd::worker
