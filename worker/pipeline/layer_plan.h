// LayerPlan: what quantization one layer gets, after the job's config has
// been resolved (layer name glob > layer type > global, minus excludes).
// The pipeline asks a LayerPlanner for every layer it visits, so it never
// needs to know where the decision came from (a preset, a structured config
// or the reference toolkit's JSON).
#ifndef QUANTD_WORKER_PIPELINE_LAYER_PLAN_H_
#define QUANTD_WORKER_PIPELINE_LAYER_PLAN_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "worker/quant/spec.h"

namespace quantd::pipeline {

struct LayerPlan {
  std::optional<quant::QuantSpec> weight;
  std::optional<quant::QuantSpec> bias;
  std::optional<quant::QuantSpec> input;
  std::optional<quant::QuantSpec> output;

  bool quantized() const { return weight || bias || input || output; }
};

// (module name, module type such as "Linear") -> plan. Must be pure: the
// pipeline may ask twice for the same layer.
using LayerPlanner = std::function<LayerPlan(const std::string& name, const std::string& type)>;

// A mixture-of-experts expert that `tokens` calibration tokens reached is
// below the floor (CalibrationOptions::min_expert_tokens; no token at all
// always is): GPTQ rounds it to nearest, its static scales come from its
// peers, or it stays in float.
inline bool BelowExpertFloor(int64_t tokens, int64_t min_expert_tokens) {
  return tokens < std::max<int64_t>(min_expert_tokens, 1);
}

}  // namespace quantd::pipeline

#endif  // QUANTD_WORKER_PIPELINE_LAYER_PLAN_H_
