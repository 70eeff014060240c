// Which algorithms a model's architecture can take, decided from its config
// alone (torch-free), so CreateJob refuses what the worker could not run and
// docs/worker.md's architecture table says the same.
#ifndef QUANTD_WORKER_ALGO_ALGORITHM_SUPPORT_H_
#define QUANTD_WORKER_ALGO_ALGORITHM_SUPPORT_H_

#include <string>

#include "worker/models/model_config.h"

namespace quantd::algo {

// Why rotation (rotation.h) cannot run on this model, or "" when it can: it
// folds its Hadamard matrices into a Llama-family block's separate q/k/v, o,
// gate/up and down projections around RMSNorms, which Phi-3 (fused
// projections), GPT-2 and OPT (LayerNorms) do not have.
std::string RotationArchitectureProblem(const models::ModelConfig& config);

}  // namespace quantd::algo

#endif  // QUANTD_WORKER_ALGO_ALGORITHM_SUPPORT_H_
