#include "worker/algo/registry.h"

#include <variant>

#include "worker/algo/awq.h"
#include "worker/algo/gptq.h"
#include "worker/algo/rotation.h"
#include "worker/algo/smoothquant.h"

namespace quantd::algo {
namespace {

// One block algorithm per alternative of config::AlgorithmOptions.
struct BlockAlgorithmFor {
  std::unique_ptr<pipeline::BlockAlgorithm> operator()(const GptqOptions& o) const {
    return std::make_unique<GptqAlgorithm>(o);
  }
  std::unique_ptr<pipeline::BlockAlgorithm> operator()(const AwqOptions& o) const {
    return std::make_unique<AwqAlgorithm>(o);
  }
  std::unique_ptr<pipeline::BlockAlgorithm> operator()(const SmoothQuantOptions& o) const {
    return std::make_unique<SmoothQuantAlgorithm>(o);
  }
  std::unique_ptr<pipeline::BlockAlgorithm> operator()(const AutoSmoothQuantOptions& o) const {
    return std::make_unique<AutoSmoothQuantAlgorithm>(o);
  }
  // The plan keeps the rotation apart.
  std::unique_ptr<pipeline::BlockAlgorithm> operator()(const RotationOptions&) const {
    return nullptr;
  }
};

}  // namespace

StatusOr<AlgorithmSet> MakeAlgorithms(const std::vector<config::AlgorithmConfig>& algorithms,
                                      const pipeline::LayerPlanner& /*planner*/) {
  QD_ASSIGN_OR_RETURN(AlgorithmPlan plan, PlanAlgorithms(algorithms));
  AlgorithmSet set;
  if (plan.rotation) {
    set.model_transform =
        std::make_unique<RotationTransform>(std::get<RotationOptions>(plan.rotation->options));
  }
  for (const PlannedAlgorithm& p : plan.block_algorithms) {
    auto algorithm = std::visit(BlockAlgorithmFor{}, p.options);
    if (!algorithm) return InternalError("rotation planned as a block algorithm");
    set.block_algorithms.push_back(std::move(algorithm));
  }
  return set;
}

}  // namespace quantd::algo
