// Resolves a job's QuantizationSettings (a preset name, a structured config
// or the reference toolkit's JSON) into what the engine runs: a layer
// planner, the reference JSON recorded in exports, and a one-line
// description for logs.
//
// A thin adapter over worker/config: ResolveQuantizationSettings gives the
// engine QuantConfig (every preset, config and JSON the server accepted at
// CreateJob), and the planner answers each layer with config::ResolveLayer
// (layer_quant_config globs > layer_type_quant_config > global, exclude,
// embeddings and lm_head left in float unless named, kv-cache output specs).
#ifndef QUANTD_WORKER_JOB_SPEC_QUANTIZATION_SETTINGS_H_
#define QUANTD_WORKER_JOB_SPEC_QUANTIZATION_SETTINGS_H_

#include <optional>
#include <string>

#include "quantd/v1/job.pb.h"
#include "worker/common/status.h"
#include "worker/config/quant_config.h"
#include "worker/pipeline/layer_plan.h"

namespace quantd::job_spec {

struct ResolvedQuantization {
  pipeline::LayerPlanner planner;
  std::string description;
  // The resolved engine config the planner answers from.
  config::QuantConfig config;
  // The kv-cache output spec when every kv_cache_quant_config entry uses the
  // same one, or the FP8 KV cache's static per-tensor fp8_e4m3 when the
  // settings ask for it (what pipeline::JobOptions::kv_cache takes), and
  // the lower bound of kv scales.
  std::optional<quant::QuantSpec> kv_cache;
  float min_kv_scale = 0;
};

// INVALID_ARGUMENT (reason INVALID_QUANT_CONFIG, every bad field as a
// violation under "spec.quantization") for settings that are not valid.
StatusOr<ResolvedQuantization> ResolveQuantization(const quantd::v1::QuantizationSettings& s);

// The same for settings already resolved into `config` by
// config::ResolveQuantizationSettings (ResolveJob resolves them once).
ResolvedQuantization ResolveQuantization(const quantd::v1::QuantizationSettings& s,
                                         config::QuantConfig config);

// The planner of a resolved engine config (pure: ResolveLayer per call).
pipeline::LayerPlanner PlannerFor(config::QuantConfig config);

}  // namespace quantd::job_spec

#endif  // QUANTD_WORKER_JOB_SPEC_QUANTIZATION_SETTINGS_H_
