// The quantization algorithms a config can name and their options, as the
// engine runs them (worker/algo builds one algorithm per AlgorithmOptions).
// Defaults are the reference toolkit's. Torch-free: the config layer, the
// server's CreateJob check and the algorithms share these types.
//
// How a source spells them: quant_config.proto's AlgorithmConfig oneof
// (config_proto.h) and the reference JSON's algo_config entries
// (quark_json.h) fill them; some options (max_shrink, scale_clamp_min,
// alpha_min, ...) have no spelling in either and keep their defaults in a
// job (docs/algorithms.md).
#ifndef QUANTD_WORKER_CONFIG_ALGORITHM_OPTIONS_H_
#define QUANTD_WORKER_CONFIG_ALGORITHM_OPTIONS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace quantd::config {

// In the order of AlgorithmOptions' alternatives.
enum class AlgorithmKind { kGptq, kAwq, kSmoothQuant, kAutoSmoothQuant, kRotation };

// The proto's oneof field names, which field paths and messages use: "gptq",
// "awq", "smooth_quant", "auto_smooth_quant", "rotation".
std::string_view AlgorithmKindName(AlgorithmKind kind);

// ---- GPTQ (worker/algo/gptq.h) ----
struct GptqOptions {
  // Damping relative to mean(diag H).
  double damp_percent = 0.01;
  // Columns per block of the lazy batch update.
  int64_t block_size = 128;
  // Quantize columns in order of decreasing diag H ("desc_act").
  bool act_order = false;
  // Fit every group's parameters before the loop, on the original weights.
  bool static_groups = false;
  // Cholesky failure: retry with damp_percent + k * damp_retry_step for
  // k = 1..max_damp_retries (so by default damping up to 0.11), then fall
  // back to round-to-nearest.
  double damp_retry_step = 0.01;
  int max_damp_retries = 10;

  bool operator==(const GptqOptions& o) const;
};

// ---- AWQ (worker/algo/awq.h) ----
// One group to scale, named as the reference's scaling_layers entry
// (relative to a decoder layer, "self_attn.q_proj"); worker/algo/awq_layout.h
// matches it to the model.
struct AwqScalingGroup {
  std::string prev_op;              // the norm or linear that absorbs the scale
  std::vector<std::string> layers;  // the group's linears
  std::string inp;                  // whose input is captured; empty: the first of layers
  std::string module2inspect;       // whose output the search compares; empty: the layers

  bool operator==(const AwqScalingGroup& o) const;
};

struct AwqOptions {
  // α takes grid values 0, 1/grid, ..., (grid - 1)/grid.
  int grid = 20;
  bool clip = true;
  // Shrink factors 1 - i/clip_grid for i < clip_grid * max_shrink.
  int clip_grid = 20;
  double max_shrink = 0.5;
  int64_t clip_max_tokens = 512;
  // Quantize the weights here with AWQ's quantizer and record them for the
  // pipeline. false: only scale and clip, and leave rounding to the
  // pipeline's round-to-nearest or to a later algorithm (GPTQ).
  bool quantize_weights = true;
  // Only these groups are scaled, clipped and quantized here (the others are
  // left to the pipeline); empty: every group of the block.
  std::vector<AwqScalingGroup> scaling_layers;
  // When set, must name the model's decoder layers ("model.layers").
  std::string model_decoder_layers;

  bool operator==(const AwqOptions& o) const;
};

// ---- SmoothQuant and AutoSmoothQuant (worker/algo/smoothquant.h) ----
struct SmoothQuantOptions {
  double alpha = 0.5;
  // Per-layer α: the first (glob, α) whose fnmatch glob matches a module name
  // of the group's linears wins, e.g. {"*.mlp.down_proj", 0.8}.
  std::vector<std::pair<std::string, double>> alpha_overrides;
  double scale_clamp_min = 1e-5;
  // Also smooth groups fed by a linear (v_proj -> o_proj, up_proj ->
  // down_proj), as the reference's Llama mapping does; false: only the
  // groups after a norm.
  bool smooth_linear_prev_ops = true;

  bool operator==(const SmoothQuantOptions& o) const;
};

struct AutoSmoothQuantOptions {
  // The α grid: alpha_min, alpha_min + alpha_step, ..., alpha_max.
  double alpha_min = 0.0;
  double alpha_max = 1.0;
  double alpha_step = 0.05;
  double scale_clamp_min = 1e-5;
  bool smooth_linear_prev_ops = true;
  // Search on the first this many calibration samples (0: all of them).
  int64_t max_search_samples = 0;

  bool operator==(const AutoSmoothQuantOptions& o) const;
};

// ---- Rotation / QuaRot (worker/algo/rotation.h) ----
struct RotationOptions {
  // Seed of R1's and R2's random signs (and of the orthogonal factor of
  // orders without a Hadamard construction).
  uint64_t seed = 0;
  // R2 per head on v_proj/o_proj.
  bool rotate_heads = true;
  // R4: online Hadamard before down_proj (QuaRot's online_had).
  bool online_down_proj = false;

  bool operator==(const RotationOptions& o) const;
};

// One algorithm: the alternative says which.
using AlgorithmOptions = std::variant<GptqOptions, AwqOptions, SmoothQuantOptions,
                                      AutoSmoothQuantOptions, RotationOptions>;

inline AlgorithmKind KindOf(const AlgorithmOptions& options) {
  return static_cast<AlgorithmKind>(options.index());
}

}  // namespace quantd::config

#endif  // QUANTD_WORKER_CONFIG_ALGORITHM_OPTIONS_H_
