// What a job asks of the quantization algorithms, before any of them is
// built: a name and a JSON object of options per algorithm, validated and
// parsed without LibTorch (the server runs CheckAlgorithmRequests at
// CreateJob; registry.h builds the algorithms in the worker).
//
// Names (aliases in parentheses): "gptq", "awq", "smoothquant"
// ("smooth_quant", "smooth"), "autosmoothquant" ("auto_smooth_quant"),
// "rotation" ("quarot"). Option keys follow the reference toolkit's
// algo_config and quantd's proto (quant_config.proto):
//   gptq:            damp_percent (0, 1), block_size (>= 1; "blocksize"),
//                    act_order / desc_act, static_groups, true_sequential
//                    (only true is supported)
//   awq:             grid_size (>= 2; "n_grid"), skip_clip_search,
//                    clip_max_tokens (>= 1), max_shrink (0, 1),
//                    scaling_layers, model_decoder_layers (the reference's
//                    layout keys, honoured: awq_layout.h)
//   smoothquant:     alpha [0, 1], layer_alpha {glob: alpha}, scale_clamp_min
//   autosmoothquant: alpha_step (0, 1], alpha_min, alpha_max [0, 1],
//                    max_search_samples (>= 0)
//   rotation:        seed (unsigned), online_hadamard ("online_had", "r4"),
//                    rotate_heads ("r2")
// Every algorithm also accepts the reference's layout keys ("name",
// "model_decoder_layers", "inside_layer_modules", "scaling_layers",
// "embedding_layers", "output_layers", "backbone", "num_attention_heads",
// "num_key_value_heads", "v_proj", "o_proj", "self_attn", "mlp") without
// using them (AWQ's scaling_layers and model_decoder_layers excepted): quantd
// derives the layout from the model's layer table. A Quark JSON config that
// holds them gets a warning per key (config::QuantConfig::notes).
//
// Execution order (whatever the request order): the rotation transforms the
// model as it is loaded; in each block the scaling algorithms (SmoothQuant,
// AutoSmoothQuant, AWQ, in request order) run before GPTQ. With GPTQ in the
// set, AWQ only scales and clips and GPTQ quantizes.
#ifndef QUANTD_WORKER_ALGO_ALGORITHM_REQUEST_H_
#define QUANTD_WORKER_ALGO_ALGORITHM_REQUEST_H_

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "worker/algo/options.h"
#include "worker/common/status.h"
#include "worker/config/quant_config.h"

namespace quantd::algo {

inline constexpr char kAlgorithmsField[] = "spec.quantization.algorithms";

struct AlgorithmRequest {
  std::string name;
  nlohmann::json options = nlohmann::json::object();
};

enum class AlgorithmKind { kGptq, kAwq, kSmoothQuant, kAutoSmoothQuant, kRotation };

// "gptq", "awq", "smoothquant", "autosmoothquant", "rotation".
const char* AlgorithmKindName(AlgorithmKind kind);

struct ParsedAlgorithm {
  AlgorithmKind kind = AlgorithmKind::kGptq;
  // Position in the request list.
  size_t index = 0;
  // The options of `kind`; the others keep their defaults.
  GptqOptions gptq;
  AwqOptions awq;
  SmoothQuantOptions smoothquant;
  AutoSmoothQuantOptions autosmoothquant;
  RotationOptions rotation;
};

struct ParsedAlgorithms {
  std::optional<ParsedAlgorithm> rotation;
  // In execution order (see above).
  std::vector<ParsedAlgorithm> block_algorithms;
};

// INVALID_ARGUMENT (reason INVALID_JOB_SPEC) with one violation per bad
// field: "<prefix>[i].name" for an unknown, repeated or conflicting name
// (SmoothQuant and AutoSmoothQuant together), "<prefix>[i].options.<key>"
// for an unknown key, a wrong type or a value out of range,
// "<prefix>[i].options" when options is not an object. UNIMPLEMENTED for
// true_sequential: false.
StatusOr<ParsedAlgorithms> ParseAlgorithmRequests(
    const std::vector<AlgorithmRequest>& requests,
    const std::string& field_prefix = kAlgorithmsField);

// The same check, for CreateJob.
Status CheckAlgorithmRequests(const std::vector<AlgorithmRequest>& requests,
                              const std::string& field_prefix = kAlgorithmsField);

// The engine config's algorithm (worker/config, parsed from the proto's
// AlgorithmConfig oneof or the reference JSON) as a request: one option per
// field that is set.
AlgorithmRequest ToAlgorithmRequest(const config::AlgorithmConfig& algorithm);
std::vector<AlgorithmRequest> ToAlgorithmRequests(
    const std::vector<config::AlgorithmConfig>& algorithms);

}  // namespace quantd::algo

#endif  // QUANTD_WORKER_ALGO_ALGORITHM_REQUEST_H_
