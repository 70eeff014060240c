#include "worker/algo/algorithm_support.h"

namespace quantd::algo {

std::string RotationArchitectureProblem(const models::ModelConfig& config) {
  if (config.family == models::ArchitectureFamily::kLlama) return "";
  return "rotation folds its Hadamard matrices into a Llama-family block's separate q/k/v, o, "
         "gate/up and down projections around RMSNorms; " +
         config.architecture + " has another block";
}

}  // namespace quantd::algo
