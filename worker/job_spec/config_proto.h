// The engine's QuantConfig and the API's quantd.v1.QuantConfig, both ways,
// and the resolution of a job's QuantizationSettings (a preset name, a
// structured config or the reference toolkit's JSON, plus the job-level
// exclude globs, algorithms and FP8 KV cache) into one engine QuantConfig.
//
// The server calls ResolveQuantizationSettings at CreateJob and the worker
// before it runs a job, so both refuse the same settings with the same
// field violations. Violation paths are relative to the job spec:
// "spec.quantization.scheme", "spec.quantization.group_size",
// "spec.quantization.config.layer_quant_config[0].config.weight.group_size",
// "spec.quantization.quark_json.global_quant_config.weight.dtype", ...
//
// Depends on the generated protos, never on LibTorch.
#ifndef QUANTD_WORKER_JOB_SPEC_CONFIG_PROTO_H_
#define QUANTD_WORKER_JOB_SPEC_CONFIG_PROTO_H_

#include <string>
#include <vector>

#include "quantd/v1/job.pb.h"
#include "quantd/v1/quant_config.pb.h"
#include "worker/common/status.h"
#include "worker/config/quant_config.h"

namespace quantd::config {

// The field-path prefix of each settings source.
inline constexpr const char* kSettingsPath = "spec.quantization";
inline constexpr const char* kConfigPath = "spec.quantization.config.";
inline constexpr const char* kQuarkJsonPath = "spec.quantization.quark_json.";

// Engine -> proto. Lossless: SpecFromProto(SpecToProto(s)) == s, and
// FromProto(ToProto(c)) == c (reference_json aside).
quantd::v1::QuantizationSpec SpecToProto(const QuantSpec& spec);
quantd::v1::QuantConfig ToProto(const QuantConfig& config);

// Proto -> engine, validated (ValidateConfig's rules plus unset or unknown
// enum values). Violations carry proto paths prefixed with `prefix`
// (e.g. kConfigPath).
StatusOr<QuantSpec> SpecFromProto(const quantd::v1::QuantizationSpec& spec,
                                  const std::string& path = "spec");
StatusOr<QuantConfig> FromProto(const quantd::v1::QuantConfig& config,
                                const std::string& prefix = "");

// The engine config a job's settings mean:
//  - scheme: PresetConfig(scheme, group_size) (group_size default 128);
//  - config: FromProto; quark_json: ParseQuarkJson (either may not set
//    group_size, which only sizes presets);
//  - exclude globs are appended to the config's own;
//  - algorithms are appended to the config's own (run in that order);
//  - fp8_kv_cache adds fp8_e4m3 static per-tensor kv_cache_quant_config on
//    *k_proj and *v_proj outputs (AddFp8KvCache).
// Every problem is one violation in a single INVALID_ARGUMENT (reason
// INVALID_QUANT_CONFIG).
StatusOr<QuantConfig> ResolveQuantizationSettings(const quantd::v1::QuantizationSettings& s);

// A job with a llama.cpp recipe (export.gguf_type) quantizes with the
// recipe's block types; its settings may only list algorithms to run with
// them. An empty config holding s.algorithms, read and validated as above;
// what else the settings hold is for CheckResolvedJobSpec to name.
StatusOr<QuantConfig> ResolveRecipeAlgorithms(const quantd::v1::QuantizationSettings& s);
// True when `s` sets nothing a recipe job refuses: no source, group_size,
// exclude or fp8_kv_cache (algorithms and calibrate_on_float_outputs may
// be set).
bool HoldsOnlyRecipeSettings(const quantd::v1::QuantizationSettings& s);

// ValidateForLayers for resolved settings, with paths relative to the job
// spec: for a preset, a per-layer problem is reported on
// spec.quantization.group_size (group sizes) or spec.quantization.scheme;
// for a config or JSON, on the config field that caused it. Warnings (globs
// that match no layer) are returned apart. Stops at `deadline`
// (LayerCheck::out_of_time).
LayerCheck ValidateSettingsForLayers(const quantd::v1::QuantizationSettings& s,
                                     const QuantConfig& resolved,
                                     const std::vector<LayerInfo>& layers,
                                     const Deadline& deadline = Deadline::Never());

// One line for logs and job events: "w_int4_per_group_sym (group 32)",
// "quark_json: weight fp8_e4m3 per_tensor; input fp8_e4m3 per_tensor, kv
// cache fp8_e4m3 per_tensor", ...
std::string DescribeSettings(const quantd::v1::QuantizationSettings& s,
                             const QuantConfig& resolved);

}  // namespace quantd::config

#endif  // QUANTD_WORKER_JOB_SPEC_CONFIG_PROTO_H_
