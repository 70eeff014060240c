// The reference toolkit's preset quantization schemes by name
// ("w_int4_per_group_sym", "w_fp8_a_fp8", "w_mxfp4_a_mxfp4", ...), with the
// reference's meaning: which of weight / input / output are quantized, how,
// static or dynamic. Every preset leaves lm_head in float, as the
// reference's LLM flows do.
//
//   w_*           weights only
//   w_*_a_*       weights (static) and layer inputs (static, or dynamic
//                 where the name says so; MX activations are dynamic)
//   *_o_fp8       also the layer outputs
//   per_token     dynamic per_channel on the token axis (ch_axis 1 of
//                 [batch, seq, hidden], as in the reference)
//
// Per-group presets take the group size (default 128); MX presets use blocks
// of 32 and refuse any other group size. Torch-free.
#ifndef QUANTD_WORKER_CONFIG_PRESETS_H_
#define QUANTD_WORKER_CONFIG_PRESETS_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "worker/common/status.h"
#include "worker/config/quant_config.h"

namespace quantd::config {

inline constexpr int kDefaultGroupSize = 128;

// The config of preset `name`. INVALID_ARGUMENT (reason
// INVALID_QUANT_CONFIG) for an unknown name (violation on `scheme_field`,
// listing the known names) or a group size the preset cannot use (violation
// on `group_size_field`).
StatusOr<QuantConfig> PresetConfig(std::string_view name, std::optional<int> group_size = {},
                                   const std::string& scheme_field = "scheme",
                                   const std::string& group_size_field = "group_size");

// Every preset name, sorted.
std::vector<std::string> PresetNames();

// One line describing what a preset quantizes, e.g. "weights int4 per_group
// (group_size) sym; inputs -" (for docs and --help).
std::string DescribePreset(std::string_view name);

// The FP8 KV-cache entries (fp8_e4m3, static, per tensor, on the outputs of
// *k_proj and *v_proj), each carrying the global layer config as the
// reference does, added to `config`.
void AddFp8KvCache(QuantConfig& config);

}  // namespace quantd::config

#endif  // QUANTD_WORKER_CONFIG_PRESETS_H_
