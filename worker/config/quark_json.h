// The reference toolkit's JSON form of a quantization config: the
// `quantization_config` object of a Quark-exported config.json, as its
// QConfig.to_dict() writes it (dtype names such as "int4", "fp8_e4m3",
// "fp4"; qscheme "per_group"; observer_cls class names; MX formats as their
// element dtype with scale_format "e8m0"; "algo_config" entries by name).
//
// ParseQuarkJson accepts that object (or a whole config.json holding it) and
// WriteQuarkJson writes one. Writing a parsed config back gives the same JSON
// value: keys and spellings the engine does not model (export settings,
// version, scaling_layers of an algorithm, ...) are kept in
// QuantConfig::reference_json and restored, unless the engine field they
// correspond to was changed in between (quark_json_canonical.h writes the
// canonical form, quark_json_record.h keeps the rest). Torch-free.
#ifndef QUANTD_WORKER_CONFIG_QUARK_JSON_H_
#define QUANTD_WORKER_CONFIG_QUARK_JSON_H_

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "worker/common/status.h"
#include "worker/config/quant_config.h"

namespace quantd::config {

// Parses and validates. Errors: INVALID_ARGUMENT (reason
// INVALID_QUANT_CONFIG) with one violation per bad field, paths in the
// reference JSON's spelling ("global_quant_config.weight.dtype",
// "layer_quant_config.*down_proj.weight.group_size", "algo_config[0].name")
// prefixed with `prefix`.
StatusOr<QuantConfig> ParseQuarkJson(std::string_view json, const std::string& prefix = "");

// The reference JSON of a config (pretty-printed with `indent` spaces; -1
// for one line).
std::string WriteQuarkJson(const QuantConfig& config, int indent = 2);

// The same with export.weight_format set to `weight_format` (an export
// object added when the config has none), as an export records the config
// it applied: "fake_quantized" for float weights. One line by default.
std::string WriteQuarkJsonForExport(const QuantConfig& config, const std::string& weight_format,
                                    int indent = -1);
// The same as a JSON value (keys sorted), for the quantization_config an
// exporter writes into config.json.
nlohmann::json QuarkJsonForExport(const QuantConfig& config, const std::string& weight_format);

// One spec in the reference's spelling, as a JSON string (for messages and
// tests).
std::string SpecToQuarkJson(const QuantSpec& spec);

}  // namespace quantd::config

#endif  // QUANTD_WORKER_CONFIG_QUARK_JSON_H_
