// The canonical reference JSON of an engine config: what WriteQuarkJson
// writes before it restores the keys and spellings of a parsed original
// (quark_json_record.h). Internal to quark_json.
#ifndef QUANTD_WORKER_CONFIG_QUARK_JSON_CANONICAL_H_
#define QUANTD_WORKER_CONFIG_QUARK_JSON_CANONICAL_H_

#include <optional>
#include <string>

#include "nlohmann/json.hpp"
#include "worker/config/quant_config.h"

namespace quantd::config::quark {

using Json = nlohmann::ordered_json;

// The tensor roles of a layer config, in the reference's key order.
inline constexpr const char* kRoles[] = {"input_tensors", "output_tensors", "weight", "bias"};

// The spec of `role` (one of kRoles) in a layer config.
std::optional<QuantSpec>* RoleField(LayerQuantConfig& c, const std::string& role);
const std::optional<QuantSpec>& RoleField(const LayerQuantConfig& c, const std::string& role);

// One spec, and a whole config, as the reference's QConfig.to_dict() writes
// them.
Json SpecJson(const QuantSpec& s);
Json ConfigJson(const QuantConfig& c);

}  // namespace quantd::config::quark

#endif  // QUANTD_WORKER_CONFIG_QUARK_JSON_CANONICAL_H_
