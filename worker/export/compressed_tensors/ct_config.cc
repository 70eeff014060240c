#include "worker/export/compressed_tensors/ct_config.h"

#include <map>

namespace quantd::exporter {

using nlohmann::json;
using quant::QScheme;
using quant::QuantSpec;

json CtQuantizationArgs(const QuantSpec& s) {
  const bool is_int = quant::IsIntType(s.dtype);
  json a = {{"num_bits", quant::BitWidth(s.dtype)},
            {"type", is_int ? "int" : "float"},
            // uint with its midpoint zero point is the same code set as int
            // with none: the library's symmetric.
            {"symmetric", s.symmetric},
            {"group_size", nullptr},
            {"block_structure", nullptr},
            {"dynamic", s.is_dynamic},
            {"actorder", nullptr},
            {"scale_dtype", nullptr},
            {"zp_dtype", nullptr},
            {"observer", s.is_dynamic ? json(nullptr) : json("minmax")},
            {"observer_kwargs", json::object()}};
  const int gs = quant::EffectiveGroupSize(s);
  if (s.qscheme == QScheme::kPerTensor) {
    a["strategy"] = "tensor";
  } else if (s.qscheme == QScheme::kPerChannel) {
    // A per-channel activation keeps one scale per token (ch_axis 1).
    a["strategy"] = s.is_dynamic ? "token" : "channel";
  } else if (gs > 0) {
    a["strategy"] = "group";
    a["group_size"] = gs;
  } else {
    a["strategy"] = "channel";  // group_size -1: one group per row
  }
  return a;
}

std::string CtFormatFor(const std::optional<QuantSpec>& weight,
                        const std::optional<QuantSpec>& input) {
  const bool int_weight = weight && quant::IsIntType(weight->dtype);
  const bool float_input = input && !quant::IsIntType(input->dtype);
  if (int_weight && input) return "int-quantized";
  if (int_weight && !float_input) return "pack-quantized";
  if (weight && !int_weight && input && !quant::IsIntType(weight->dtype)) return "float-quantized";
  return "naive-quantized";
}

bool CtFormatIsPacked(const std::string& format) { return format == "pack-quantized"; }

StatusOr<json> BuildCtQuantizationConfig(const CtConfigInput& in) {
  if (in.quantized.empty())
    return InvalidArgumentError(
        "compressed_tensors: no Linear weight is quantized; export hf for a float model");
  struct Group {
    json scheme;
    std::vector<std::string> names;
  };
  std::vector<Group> groups;
  std::map<std::string, size_t> index;  // scheme dump -> group
  for (const CtLayerQuant& l : in.quantized) {
    if (!l.weight)
      return InvalidArgumentError("compressed_tensors: " + l.name +
                                  " quantizes its input but not its weight");
    const std::string format = CtFormatFor(l.weight, l.input);
    json weights = CtQuantizationArgs(*l.weight);
    if (l.group_actorder) weights["actorder"] = "group";
    json scheme = {{"weights", std::move(weights)},
                   {"input_activations", l.input ? CtQuantizationArgs(*l.input) : json(nullptr)},
                   {"output_activations", nullptr},
                   {"format", format}};
    const std::string key = scheme.dump();
    auto [it, added] = index.emplace(key, groups.size());
    if (added) groups.push_back({std::move(scheme), {}});
    groups[it->second].names.push_back(l.name);
  }
  json config_groups = json::object();
  std::string format;
  for (size_t g = 0; g < groups.size(); ++g) {
    json scheme = groups[g].scheme;
    // One group: every quantized Linear, the rest named in ignore.
    scheme["targets"] = groups.size() == 1 ? json::array({"Linear"}) : json(groups[g].names);
    const std::string f = scheme["format"];
    format = format.empty() || format == f ? f : "mixed-precision";
    config_groups["group_" + std::to_string(g)] = std::move(scheme);
  }
  json kv = nullptr;
  if (in.kv_cache) kv = CtQuantizationArgs(*in.kv_cache);
  return json{{"quant_method", "compressed-tensors"},
              {"quantization_status", "compressed"},
              {"format", format},
              {"config_groups", std::move(config_groups)},
              {"ignore", in.unquantized},
              {"kv_cache_scheme", std::move(kv)},
              {"global_compression_ratio", nullptr},
              {"version", kCtLibraryVersion}};
}

}  // namespace quantd::exporter
