#include "worker/quant/observer.h"

#include <string>
#include <vector>

#include "worker/quant/observer_impl.h"

namespace quantd::quant {

StatusOr<std::unique_ptr<Observer>> Observer::Create(const QuantSpec& spec,
                                                     const ObserverOptions& options) {
  if (IsCastType(spec.dtype)) return observer_impl::NewCastObserver(spec);
  std::vector<FieldViolation> violations;
  // The weight role skips only the activation-specific rule.
  ValidateSpec(spec, TensorRole::kWeight, "spec", &violations);
  if (!violations.empty()) {
    Status s = InvalidArgumentError("the spec cannot be calibrated: " + violations[0].field + ": " +
                                    violations[0].description);
    for (const FieldViolation& v : violations) s.AddViolation(v.field, v.description);
    return s.WithReason("INVALID_QUANT_CONFIG");
  }
  const int bins = options.num_bins == 0 ? 2048 : options.num_bins;
  if (bins < 2 || (bins & (bins - 1)) != 0) {
    return InvalidArgumentError("histogram observers need a power-of-two bin count; got " +
                                std::to_string(bins));
  }
  if (IsMxType(spec.dtype)) return observer_impl::NewMxAmaxObserver(spec);
  if (spec.observer == ObserverType::kMinMax) return observer_impl::NewMinMaxObserver(spec);
  ObserverOptions resolved = options;
  resolved.num_bins = bins;
  return observer_impl::NewHistogramObserver(spec, resolved);
}

}  // namespace quantd::quant
