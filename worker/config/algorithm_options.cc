#include "worker/config/algorithm_options.h"

#include <tuple>

namespace quantd::config {

std::string_view AlgorithmKindName(AlgorithmKind kind) {
  switch (kind) {
    case AlgorithmKind::kGptq:
      return "gptq";
    case AlgorithmKind::kAwq:
      return "awq";
    case AlgorithmKind::kSmoothQuant:
      return "smooth_quant";
    case AlgorithmKind::kAutoSmoothQuant:
      return "auto_smooth_quant";
    case AlgorithmKind::kRotation:
      return "rotation";
  }
  return "unknown";
}

bool GptqOptions::operator==(const GptqOptions& o) const {
  return std::tie(damp_percent, block_size, act_order, static_groups, damp_retry_step,
                  max_damp_retries) == std::tie(o.damp_percent, o.block_size, o.act_order,
                                                o.static_groups, o.damp_retry_step,
                                                o.max_damp_retries);
}

bool AwqScalingGroup::operator==(const AwqScalingGroup& o) const {
  return std::tie(prev_op, layers, inp, module2inspect) ==
         std::tie(o.prev_op, o.layers, o.inp, o.module2inspect);
}

bool AwqOptions::operator==(const AwqOptions& o) const {
  return std::tie(grid, clip, clip_grid, max_shrink, clip_max_tokens, quantize_weights,
                  scaling_layers, model_decoder_layers) ==
         std::tie(o.grid, o.clip, o.clip_grid, o.max_shrink, o.clip_max_tokens,
                  o.quantize_weights, o.scaling_layers, o.model_decoder_layers);
}

bool SmoothQuantOptions::operator==(const SmoothQuantOptions& o) const {
  return std::tie(alpha, alpha_overrides, scale_clamp_min, smooth_linear_prev_ops) ==
         std::tie(o.alpha, o.alpha_overrides, o.scale_clamp_min, o.smooth_linear_prev_ops);
}

bool AutoSmoothQuantOptions::operator==(const AutoSmoothQuantOptions& o) const {
  return std::tie(alpha_min, alpha_max, alpha_step, scale_clamp_min, smooth_linear_prev_ops,
                  max_search_samples) == std::tie(o.alpha_min, o.alpha_max, o.alpha_step,
                                                  o.scale_clamp_min, o.smooth_linear_prev_ops,
                                                  o.max_search_samples);
}

bool RotationOptions::operator==(const RotationOptions& o) const {
  return std::tie(seed, rotate_heads, online_down_proj) ==
         std::tie(o.seed, o.rotate_heads, o.online_down_proj);
}

}  // namespace quantd::config
