#include "worker/algo/algorithm_support.h"

namespace quantd::algo {

std::string RotationArchitectureProblem(const models::ModelConfig& config) {
  if (config.family == models::ArchitectureFamily::kLlama && config.num_experts == 0) return "";
  if (config.num_experts > 0) {
    return "rotation folds its Hadamard matrices into a dense Llama-family block; " +
           config.architecture + " has mixture-of-experts blocks (a router and experts)";
  }
  return "rotation folds its Hadamard matrices into a Llama-family block's separate q/k/v, o, "
         "gate/up and down projections around RMSNorms; " +
         config.architecture + " has another block";
}

}  // namespace quantd::algo
