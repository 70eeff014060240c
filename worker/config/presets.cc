#include "worker/config/presets.h"

#include <algorithm>
#include <functional>
#include <map>

namespace quantd::config {
namespace {

using quant::DataType;
using quant::ObserverType;
using quant::QScheme;

QuantSpec Int(DataType t, QScheme q, bool symmetric, bool dynamic = false,
              std::optional<int> axis = std::nullopt, std::optional<int> group = std::nullopt,
              ObserverType observer = ObserverType::kMinMax) {
  QuantSpec s;
  s.dtype = t;
  s.qscheme = q;
  s.symmetric = symmetric;
  s.is_dynamic = dynamic;
  s.ch_axis = axis;
  s.group_size = group;
  s.observer = observer;
  return s;
}

QuantSpec PerTensor(DataType t, bool symmetric, bool dynamic = false,
                    ObserverType observer = ObserverType::kMinMax) {
  return Int(t, QScheme::kPerTensor, symmetric, dynamic, std::nullopt, std::nullopt, observer);
}

// Weights [out, in]: one scale per output channel.
QuantSpec PerChannel(DataType t, bool symmetric) {
  return Int(t, QScheme::kPerChannel, symmetric, false, 0);
}

// Activations [batch, seq, hidden]: one scale per token, at every forward.
QuantSpec PerToken(DataType t) { return Int(t, QScheme::kPerChannel, true, true, 1); }

// Weights [out, in]: groups along the input axis.
QuantSpec PerGroup(DataType t, bool symmetric, int group) {
  return Int(t, QScheme::kPerGroup, symmetric, false, 1, group);
}

QuantSpec Mx(DataType t, bool dynamic) {
  QuantSpec s;
  s.dtype = t;
  s.qscheme = QScheme::kPerGroup;
  s.ch_axis = -1;
  s.group_size = quant::kMxBlockSize;
  s.is_dynamic = dynamic;
  return s;
}

QuantSpec Cast(DataType t) {
  QuantSpec s;
  s.dtype = t;
  return s;
}

struct Preset {
  std::function<LayerQuantConfig(int group)> build;
  bool grouped = false;  // takes the group size
  bool mx = false;       // blocks of 32 only
};

LayerQuantConfig W(QuantSpec w) {
  LayerQuantConfig c;
  c.weight = w;
  return c;
}

LayerQuantConfig WA(QuantSpec w, QuantSpec a) {
  LayerQuantConfig c;
  c.weight = w;
  c.input_tensors = a;
  return c;
}

LayerQuantConfig WAO(QuantSpec w, QuantSpec a, QuantSpec o) {
  LayerQuantConfig c = WA(w, a);
  c.output_tensors = o;
  return c;
}

const std::map<std::string, Preset>& Presets() {
  static const std::map<std::string, Preset> kPresets = [] {
    std::map<std::string, Preset> p;
    auto fixed = [](LayerQuantConfig c) { return Preset{[c](int) { return c; }, false, false}; };
    auto grouped = [](DataType t, bool sym) {
      return Preset{[t, sym](int g) { return W(PerGroup(t, sym, g)); }, true, false};
    };
    auto mx = [](LayerQuantConfig c) { return Preset{[c](int) { return c; }, false, true}; };
    // Integer weights.
    p["w_int4_per_channel_sym"] = fixed(W(PerChannel(DataType::kInt4, true)));
    p["w_int4_per_channel_asym"] = fixed(W(PerChannel(DataType::kInt4, false)));
    p["w_uint4_per_channel_sym"] = fixed(W(PerChannel(DataType::kUInt4, true)));
    p["w_uint4_per_channel_asym"] = fixed(W(PerChannel(DataType::kUInt4, false)));
    p["w_int4_per_group_sym"] = grouped(DataType::kInt4, true);
    p["w_int4_per_group_asym"] = grouped(DataType::kInt4, false);
    p["w_uint4_per_group_sym"] = grouped(DataType::kUInt4, true);
    p["w_uint4_per_group_asym"] = grouped(DataType::kUInt4, false);
    p["w_int2_per_group_asym"] = grouped(DataType::kInt2, false);
    p["w_int8_per_group_sym"] = grouped(DataType::kInt8, true);
    p["w_uint8_per_group_asym"] = grouped(DataType::kUInt8, false);
    p["w_int8_per_tensor_sym"] = fixed(W(PerTensor(DataType::kInt8, true)));
    p["w_int8_per_channel_sym"] = fixed(W(PerChannel(DataType::kInt8, true)));
    // Integer weights and activations.
    p["w_int8_a_int8_per_tensor_sym"] =
        fixed(WA(PerTensor(DataType::kInt8, true), PerTensor(DataType::kInt8, true)));
    p["w_int8_a_int8_per_tensor_sym_dynamic"] =
        fixed(WA(PerTensor(DataType::kInt8, true, true), PerTensor(DataType::kInt8, true, true)));
    p["w_int8_per_channel_a_int8_per_tensor_sym"] =
        fixed(WA(PerChannel(DataType::kInt8, true), PerTensor(DataType::kInt8, true)));
    p["w_int8_per_channel_a_int8_per_tensor_sym_dynamic"] =
        fixed(WA(PerChannel(DataType::kInt8, true), PerTensor(DataType::kInt8, true, true)));
    p["w_int8_a_int8_per_token_dynamic"] =
        fixed(WA(PerChannel(DataType::kInt8, true), PerToken(DataType::kInt8)));
    p["w_uint8_a_uint8_per_tensor_asym"] =
        fixed(WA(PerTensor(DataType::kUInt8, false), PerTensor(DataType::kUInt8, false)));
    // Calibrated ranges (the reference's percentile / MSE variants: the
    // weights use the observer, the inputs min-max).
    p["w_int8_per_tensor_percentile"] =
        fixed(WA(PerTensor(DataType::kInt8, true, false, ObserverType::kPercentile),
                 PerTensor(DataType::kInt8, true)));
    p["w_int8_per_tensor_mse"] =
        fixed(WA(PerTensor(DataType::kInt8, true, false, ObserverType::kMse),
                 PerTensor(DataType::kInt8, true)));
    p["w_uint8_per_tensor_percentile"] =
        fixed(WA(PerTensor(DataType::kUInt8, true, false, ObserverType::kPercentile),
                 PerTensor(DataType::kUInt8, true)));
    p["w_uint8_per_tensor_mse"] =
        fixed(WA(PerTensor(DataType::kUInt8, true, false, ObserverType::kMse),
                 PerTensor(DataType::kUInt8, true)));
    // FP8.
    const QuantSpec fp8 = PerTensor(DataType::kFp8E4M3, true);
    p["w_fp8_a_fp8"] = fixed(WA(fp8, fp8));
    p["w_fp8_a_fp8_o_fp8"] = fixed(WAO(fp8, fp8, fp8));
    p["w_fp8_per_channel_sym"] = fixed(WAO(PerChannel(DataType::kFp8E4M3, true), fp8, fp8));
    p["w_fp8_per_channel_a_fp8_per_token_dynamic"] =
        fixed(WA(PerChannel(DataType::kFp8E4M3, true), PerToken(DataType::kFp8E4M3)));
    // OCP MX: static weights, dynamic activations.
    p["w_mxfp4"] = mx(W(Mx(DataType::kMxFp4, false)));
    p["w_mxfp4_a_mxfp4"] = mx(WA(Mx(DataType::kMxFp4, false), Mx(DataType::kMxFp4, true)));
    p["w_mxfp4_a_mxfp6_e2m3"] = mx(WA(Mx(DataType::kMxFp4, false), Mx(DataType::kMxFp6E2M3, true)));
    p["w_mxfp4_a_mxfp6"] = p["w_mxfp4_a_mxfp6_e2m3"];  // the reference's older name
    p["w_mxfp6_e3m2"] = mx(W(Mx(DataType::kMxFp6E3M2, false)));
    p["w_mxfp6_e3m2_a_mxfp6_e3m2"] =
        mx(WA(Mx(DataType::kMxFp6E3M2, false), Mx(DataType::kMxFp6E3M2, true)));
    p["w_mxfp6_e2m3"] = mx(W(Mx(DataType::kMxFp6E2M3, false)));
    p["w_mxfp6_e2m3_a_mxfp6_e2m3"] =
        mx(WA(Mx(DataType::kMxFp6E2M3, false), Mx(DataType::kMxFp6E2M3, true)));
    p["w_mxfp8"] = mx(W(Mx(DataType::kMxFp8E4M3, false)));
    p["w_mxfp8_a_mxfp8"] = mx(WA(Mx(DataType::kMxFp8E4M3, false), Mx(DataType::kMxFp8E4M3, true)));
    p["w_mxint8"] = mx(W(Mx(DataType::kMxInt8, false)));
    p["w_mxint8_a_mxint8"] = mx(WA(Mx(DataType::kMxInt8, false), Mx(DataType::kMxInt8, true)));
    // Casts.
    p["w_bf16"] = fixed(W(Cast(DataType::kBFloat16)));
    p["w_fp16"] = fixed(W(Cast(DataType::kFloat16)));
    return p;
  }();
  return kPresets;
}

}  // namespace

StatusOr<QuantConfig> PresetConfig(std::string_view name, std::optional<int> group_size,
                                   const std::string& scheme_field,
                                   const std::string& group_size_field) {
  const auto& presets = Presets();
  const auto it = presets.find(std::string(name));
  if (it == presets.end()) {
    std::string known;
    for (const auto& [n, p] : presets) known += (known.empty() ? "" : ", ") + n;
    return ViolationsStatus({{scheme_field, "unknown quantization scheme '" + std::string(name) +
                                                "'; known: " + known}});
  }
  const Preset& preset = it->second;
  if (group_size && preset.mx && *group_size != quant::kMxBlockSize) {
    return ViolationsStatus(
        {{group_size_field, std::string(name) + " uses MX blocks of " +
                                std::to_string(quant::kMxBlockSize) + "; got group_size " +
                                std::to_string(*group_size)}});
  }
  if (group_size && preset.grouped && *group_size <= 0 && *group_size != -1) {
    return ViolationsStatus({{group_size_field,
                              "group_size must be positive (or -1 for the whole "
                              "input width); got " +
                                  std::to_string(*group_size)}});
  }
  QuantConfig config;
  config.global_quant_config = preset.build(group_size.value_or(kDefaultGroupSize));
  config.exclude = {"lm_head"};
  return config;
}

std::vector<std::string> PresetNames() {
  std::vector<std::string> names;
  for (const auto& [n, p] : Presets()) names.push_back(n);
  return names;
}

std::string DescribePreset(std::string_view name) {
  auto config = PresetConfig(name);
  if (!config.ok()) return "unknown scheme";
  const LayerQuantConfig& c = config->global_quant_config;
  auto part = [](const char* what, const std::optional<QuantSpec>& s) {
    return std::string(what) + " " + (s ? quant::DescribeSpec(*s) : std::string("-"));
  };
  std::string out = part("weights", c.weight) + "; " + part("inputs", c.input_tensors);
  if (c.output_tensors) out += "; " + part("outputs", c.output_tensors);
  return out;
}

void AddFp8KvCache(QuantConfig& config) {
  QuantSpec fp8;
  fp8.dtype = DataType::kFp8E4M3;
  for (const char* pattern : {"*k_proj", "*v_proj"}) {
    LayerQuantConfig entry = config.global_quant_config;
    entry.output_tensors = fp8;
    auto existing =
        std::find_if(config.kv_cache_quant_config.begin(), config.kv_cache_quant_config.end(),
                     [&](const NamedLayerQuantConfig& n) { return n.pattern == pattern; });
    if (existing != config.kv_cache_quant_config.end()) {
      existing->config = entry;
    } else {
      config.kv_cache_quant_config.push_back({pattern, entry});
    }
  }
}

}  // namespace quantd::config
