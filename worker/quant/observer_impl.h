// Constructors of the observer implementations, for Observer::Create.
// Internal to worker/quant.
#ifndef QUANTD_WORKER_QUANT_OBSERVER_IMPL_H_
#define QUANTD_WORKER_QUANT_OBSERVER_IMPL_H_

#include <memory>

#include "worker/quant/observer.h"

namespace quantd::quant::observer_impl {

// observer_minmax.cc
std::unique_ptr<Observer> NewMinMaxObserver(const QuantSpec& spec);
std::unique_ptr<Observer> NewMxAmaxObserver(const QuantSpec& spec);
std::unique_ptr<Observer> NewCastObserver(const QuantSpec& spec);

// observer_histogram.cc: percentile and MSE.
std::unique_ptr<Observer> NewHistogramObserver(const QuantSpec& spec,
                                               const ObserverOptions& options);

}  // namespace quantd::quant::observer_impl

#endif  // QUANTD_WORKER_QUANT_OBSERVER_IMPL_H_
