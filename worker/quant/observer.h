// Observers: what calibration feeds activation (and weight) batches into, and
// what turns the statistics into quantization parameters.
//
//  - MinMax: running min / max per parameter slot (per tensor, per channel,
//    per group); for MX specs the running amax of every block.
//  - Percentile (per tensor): histograms of |x| (zeros skipped, as in the
//    reference); the range is the spec's percentile of |x| (default
//    99.99999999), at most the observed amax.
//  - MSE (per tensor): the same histograms; the range is the bin edge whose
//    fake quantization of the histogram has the least squared error.
//
// Histograms have a power-of-two range that doubles (merging bin pairs) as
// larger values arrive, so the result does not depend on the order of the
// batches and Merge() is exact. Observers are deterministic; with
// ObserverOptions::max_samples_per_batch the histogram observers look at a
// random subset of each batch drawn from `seed`.
//
// Dynamic specs keep only the last batch, as in the reference.
#ifndef QUANTD_WORKER_QUANT_OBSERVER_H_
#define QUANTD_WORKER_QUANT_OBSERVER_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>

#include "worker/common/status.h"
#include "worker/quant/qparams.h"
#include "worker/quant/spec.h"

namespace quantd::quant {

struct ObserverOptions {
  // Seed of the per-batch sampling of the histogram observers.
  uint64_t seed = 0;
  // Histogram observers: look at no more than this many elements of a batch
  // (0: all of them).
  int64_t max_samples_per_batch = 0;
  // Histogram bins (a power of two). 0: 2048.
  int num_bins = 0;
};

class Observer {
 public:
  virtual ~Observer() = default;

  // The observer for `spec` (its observer type and granularity).
  // INVALID_ARGUMENT for a spec the observer cannot calibrate (percentile or
  // MSE per channel, a histogram size that is not a power of two).
  static StatusOr<std::unique_ptr<Observer>> Create(const QuantSpec& spec,
                                                    const ObserverOptions& options = {});

  // Accumulates one batch (float32 / float16 / bfloat16, any device). The
  // parameter shape (e.g. the channel count) must not change between
  // batches.
  virtual Status Observe(const at::Tensor& x) = 0;

  // Folds in the statistics of another observer of the same spec, e.g. one
  // that saw another shard of the calibration data.
  virtual Status Merge(const Observer& other) = 0;

  // Parameters from everything observed (CPU tensors, QParams shapes). With
  // nothing observed: FAILED_PRECONDITION.
  virtual StatusOr<QParams> ComputeQParams() const = 0;

  // Forgets everything observed.
  virtual void Reset() = 0;

  const QuantSpec& spec() const { return spec_; }
  int64_t num_batches() const { return num_batches_; }

 protected:
  Observer(const QuantSpec& spec, at::ScalarType input_dtype)
      : spec_(spec), input_dtype_(input_dtype) {}

  QuantSpec spec_;
  // The dtype of the observed tensors (scale type "float" follows it).
  at::ScalarType input_dtype_;
  int64_t num_batches_ = 0;
};

}  // namespace quantd::quant

#endif  // QUANTD_WORKER_QUANT_OBSERVER_H_
