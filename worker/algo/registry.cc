#include "worker/algo/registry.h"

#include "worker/algo/awq.h"
#include "worker/algo/gptq.h"
#include "worker/algo/rotation.h"
#include "worker/algo/smoothquant.h"

namespace quantd::algo {

StatusOr<AlgorithmSet> MakeAlgorithms(const std::vector<AlgorithmRequest>& requests,
                                      const pipeline::LayerPlanner& /*planner*/) {
  QD_ASSIGN_OR_RETURN(ParsedAlgorithms parsed, ParseAlgorithmRequests(requests));
  AlgorithmSet set;
  if (parsed.rotation)
    set.model_transform = std::make_unique<RotationTransform>(parsed.rotation->rotation);
  for (const ParsedAlgorithm& p : parsed.block_algorithms) {
    switch (p.kind) {
      case AlgorithmKind::kGptq:
        set.block_algorithms.push_back(std::make_unique<GptqAlgorithm>(p.gptq));
        break;
      case AlgorithmKind::kAwq:
        set.block_algorithms.push_back(std::make_unique<AwqAlgorithm>(p.awq));
        break;
      case AlgorithmKind::kSmoothQuant:
        set.block_algorithms.push_back(std::make_unique<SmoothQuantAlgorithm>(p.smoothquant));
        break;
      case AlgorithmKind::kAutoSmoothQuant:
        set.block_algorithms.push_back(
            std::make_unique<AutoSmoothQuantAlgorithm>(p.autosmoothquant));
        break;
      case AlgorithmKind::kRotation:
        return InternalError("rotation parsed as a block algorithm");
    }
  }
  return set;
}

}  // namespace quantd::algo
