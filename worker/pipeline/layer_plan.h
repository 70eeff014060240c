// LayerPlan: what quantization one layer gets, after the job's config has
// been resolved (layer name glob > layer type > global, minus excludes).
// The pipeline asks a LayerPlanner for every layer it visits, so it never
// needs to know where the decision came from (a preset, a structured config
// or the reference toolkit's JSON).
#ifndef QUANTD_WORKER_PIPELINE_LAYER_PLAN_H_
#define QUANTD_WORKER_PIPELINE_LAYER_PLAN_H_

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

}  // namespace quantd::pipeline

#endif  // QUANTD_WORKER_PIPELINE_LAYER_PLAN_H_
