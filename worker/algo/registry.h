// Builds the algorithms of a job from its config's algorithms
// (algorithm_plan.h): the worker calls MakeAlgorithms and puts the result
// into JobOptions (block_algorithms, model_transform).
#ifndef QUANTD_WORKER_ALGO_REGISTRY_H_
#define QUANTD_WORKER_ALGO_REGISTRY_H_

#include <memory>
#include <vector>

#include "worker/algo/algorithm_plan.h"
#include "worker/common/status.h"
#include "worker/config/quant_config.h"
#include "worker/pipeline/block_algorithm.h"
#include "worker/pipeline/layer_plan.h"

namespace quantd::algo {

struct AlgorithmSet {
  // In execution order: scaling algorithms, then GPTQ.
  std::vector<std::unique_ptr<pipeline::BlockAlgorithm>> block_algorithms;
  // The rotation, or null.
  std::unique_ptr<pipeline::ModelTransform> model_transform;
};

// Errors are PlanAlgorithms'. The algorithms read each layer's plan from the
// block context (BlockAlgorithmContext::planner) as they run, so `planner`
// (the job's) is not consulted while building them.
StatusOr<AlgorithmSet> MakeAlgorithms(const std::vector<config::AlgorithmConfig>& algorithms,
                                      const pipeline::LayerPlanner& planner);

}  // namespace quantd::algo

#endif  // QUANTD_WORKER_ALGO_REGISTRY_H_
