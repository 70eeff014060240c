// Resolves a job's QuantizationSettings (a preset name, a structured config
// or the reference toolkit's JSON) into what the engine runs: a layer
// planner, the reference JSON recorded in exports, and a one-line
// description for logs.
#ifndef QUANTD_WORKER_QUANTIZATION_SETTINGS_H_
#define QUANTD_WORKER_QUANTIZATION_SETTINGS_H_

#include <string>

#include "quantd/v1/job.pb.h"
#include "worker/common/status.h"
#include "worker/pipeline/layer_plan.h"

namespace quantd::worker {

struct ResolvedQuantization {
  pipeline::LayerPlanner planner;
  std::string quark_json;
  std::string description;
};

// INVALID_ARGUMENT (violations under "spec.quantization") or UNIMPLEMENTED
// for settings the engine does not run.
StatusOr<ResolvedQuantization> ResolveQuantization(const quantd::v1::QuantizationSettings& s);

}  // namespace quantd::worker

#endif  // QUANTD_WORKER_QUANTIZATION_SETTINGS_H_
