// What a job's algorithms run as, before any of them is built: the config's
// algorithms (config::AlgorithmConfig, already validated by the config
// layer) in execution order, with the options each one gets. Torch-free:
// the server plans at CreateJob to refuse what the engine would refuse, and
// MakeAlgorithms (registry.h) builds the plan in the worker.
//
// Execution order (whatever the config's order): the rotation transforms the
// model as it is loaded; in each block the scaling algorithms (SmoothQuant,
// AutoSmoothQuant, AWQ, in config order) run before GPTQ. With GPTQ in the
// set, AWQ only scales and clips and GPTQ quantizes. SmoothQuant's
// layer_alpha globs are tried in glob order (as a proto map has none).
#ifndef QUANTD_WORKER_ALGO_ALGORITHM_PLAN_H_
#define QUANTD_WORKER_ALGO_ALGORITHM_PLAN_H_

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "worker/common/status.h"
#include "worker/config/algorithm_options.h"
#include "worker/config/quant_config.h"

namespace quantd::algo {

using config::AlgorithmKind;

inline constexpr char kAlgorithmsField[] = "spec.quantization.algorithms";

struct PlannedAlgorithm {
  // Position in the config's list.
  size_t index = 0;
  config::AlgorithmOptions options;

  AlgorithmKind kind() const { return config::KindOf(options); }
};

struct AlgorithmPlan {
  std::optional<PlannedAlgorithm> rotation;
  // In execution order (see above).
  std::vector<PlannedAlgorithm> block_algorithms;
};

// The engine's rules beyond the config's validation (ValidateConfig), as
// INVALID_ARGUMENT (reason INVALID_JOB_SPEC) with one violation per bad
// field: "<prefix>[i].name" for a kind listed twice or for SmoothQuant and
// AutoSmoothQuant together, "<prefix>[i].options.<key>" for an option
// outside what the algorithm runs with (damp_percent below 1, grid_size at
// least 2, alpha_min not above alpha_max).
StatusOr<AlgorithmPlan> PlanAlgorithms(const std::vector<config::AlgorithmConfig>& algorithms,
                                       const std::string& field_prefix = kAlgorithmsField);

}  // namespace quantd::algo

#endif  // QUANTD_WORKER_ALGO_ALGORITHM_PLAN_H_
