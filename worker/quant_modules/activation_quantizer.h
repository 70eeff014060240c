// ActivationQuantizer: the input or output quantizer of a quantized module
// (QuantConv2d, QuantConvTranspose2d, QuantEmbeddingBag), following the
// module's resolved LayerPlan:
//  - no spec: the tensor passes unchanged;
//  - a dynamic spec: parameters from each tensor at each forward;
//  - a static spec: an observer (MinMax, Percentile or MSE, as the spec says)
//    sees the calibration tensors, Finish() fixes the parameters, and every
//    forward uses them.
#ifndef QUANTD_WORKER_QUANT_MODULES_ACTIVATION_QUANTIZER_H_
#define QUANTD_WORKER_QUANT_MODULES_ACTIVATION_QUANTIZER_H_

#include <ATen/ATen.h>

#include <memory>
#include <optional>
#include <string>

#include "worker/common/status.h"
#include "worker/quant/observer.h"
#include "worker/quant/qparams.h"
#include "worker/quant/spec.h"

namespace quantd::quant_modules {

class ActivationQuantizer {
 public:
  // `what` names the quantizer in errors, e.g. "model.conv_in input".
  // INVALID_ARGUMENT when the spec has no observer for static calibration.
  static StatusOr<ActivationQuantizer> Create(std::optional<quant::QuantSpec> spec,
                                              std::string what);

  bool enabled() const { return spec_.has_value(); }
  bool is_static() const { return spec_ && !spec_->is_dynamic; }
  const std::optional<quant::QuantSpec>& spec() const { return spec_; }

  // Static: feeds the observer (a no-op otherwise).
  Status Observe(const at::Tensor& x);
  // Static: fixes the parameters from what was observed; FAILED_PRECONDITION
  // when nothing was.
  Status Finish();
  // The fake-quantized tensor. FAILED_PRECONDITION for a static quantizer
  // that has not been calibrated.
  StatusOr<at::Tensor> Apply(const at::Tensor& x) const;
  // The static parameters (empty before Finish and for dynamic specs).
  const quant::QParams& qparams() const { return qparams_; }

 private:
  std::optional<quant::QuantSpec> spec_;
  std::string what_;
  std::unique_ptr<quant::Observer> observer_;
  quant::QParams qparams_;
  bool calibrated_ = false;
};

}  // namespace quantd::quant_modules

#endif  // QUANTD_WORKER_QUANT_MODULES_ACTIVATION_QUANTIZER_H_
