// The reference toolkit's (AMD Quark) quantization_config JSON, as the HF
// quark export writes it and its importer reads it back.
//
// A config has global_quant_config, layer_type_quant_config (keyed by module
// type, e.g. "Linear") and layer_quant_config (keyed by fnmatch globs of
// module names), each a layer config {weight, bias, input_tensors,
// output_tensors}; `exclude` lists module-name globs left in float (a glob
// `p` also matches `p.*`; "re:<regex>" is an RE2 regex matched from the
// start of the name, as config::ExcludeMatch); `export` describes the files (weight_format,
// pack_method, kv_cache_group, min_kv_scale). MX formats are spelled as the
// reference writes them: the element dtype ("fp4", "fp8_e4m3", ...) with
// qscheme per_group, group_size 32 and scale_format "e8m0" (older files: dtype
// "mx" plus mx_element_dtype). Torch-free.
#ifndef QUANTD_WORKER_EXPORT_HF_QUARK_CONFIG_H_
#define QUANTD_WORKER_EXPORT_HF_QUARK_CONFIG_H_

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "worker/common/status.h"
#include "worker/quant/spec.h"

namespace quantd::exporter {

// What one module's tensors are quantized with; empty optionals stay float.
struct QuarkLayerSpecs {
  std::optional<quant::QuantSpec> weight;
  std::optional<quant::QuantSpec> bias;
  std::optional<quant::QuantSpec> input;
  std::optional<quant::QuantSpec> output;

  bool quantized() const { return weight || bias || input || output; }
};

// The "export" section.
struct QuarkExportSection {
  std::string weight_format = "real_quantized";
  std::string pack_method = "reorder";
  std::vector<std::string> kv_cache_group;
  double min_kv_scale = 0.0;
};

// The JSON object of one spec. MX types use the reference's element spelling
// (see the file comment).
nlohmann::json QuarkSpecJson(const quant::QuantSpec& spec);
// null for an absent spec.
nlohmann::json QuarkLayerJson(const QuarkLayerSpecs& specs);
// The "export" object the exports write (weight_merge_groups null).
nlohmann::json QuarkExportJson(const QuarkExportSection& section);

// A spec from its JSON object; nullopt for JSON null. INVALID_ARGUMENT naming
// `path` and the field for an unknown dtype / qscheme / round method or a
// mistyped field; UNIMPLEMENTED for a list of specs (sequential quantizers).
StatusOr<std::optional<quant::QuantSpec>> ParseQuarkSpec(const nlohmann::json& j,
                                                         const std::string& path);

// Python fnmatch semantics (case-sensitive): '*' also matches '.' and '/'.
// Linear time (worker/common/name_pattern.h).
bool QuarkGlobMatch(const std::string& pattern, const std::string& name);

class QuarkConfig {
 public:
  // `json_text` is the quantization_config object (not the whole config.json),
  // parsed within the bounds of a model's config.json (bounded_json.h).
  static StatusOr<QuarkConfig> Parse(const std::string& json_text);

  // The specs of module `name` of type `type` ("Linear"): the first matching
  // layer_quant_config glob, else layer_type_quant_config[type], else the
  // global config; nothing when an exclude glob matches.
  QuarkLayerSpecs Resolve(const std::string& name, const std::string& type) const;
  bool Excluded(const std::string& name) const;

  const QuarkExportSection& export_section() const { return export_; }
  const nlohmann::json& raw() const { return json_; }

 private:
  nlohmann::json json_;
  QuarkLayerSpecs global_;
  std::vector<std::pair<std::string, QuarkLayerSpecs>> by_type_;
  std::vector<std::pair<std::string, QuarkLayerSpecs>> by_name_;  // file order
  std::vector<std::string> exclude_;
  QuarkExportSection export_;
};

}  // namespace quantd::exporter

#endif  // QUANTD_WORKER_EXPORT_HF_QUARK_CONFIG_H_
