#include "worker/quant_modules/activation_quantizer.h"

#include <utility>

#include "worker/quant/fake_quant.h"

namespace quantd::quant_modules {

StatusOr<ActivationQuantizer> ActivationQuantizer::Create(std::optional<quant::QuantSpec> spec,
                                                          std::string what) {
  ActivationQuantizer q;
  q.spec_ = std::move(spec);
  q.what_ = std::move(what);
  if (q.is_static() && !quant::IsCastType(q.spec_->dtype)) {
    auto observer = quant::Observer::Create(*q.spec_);
    if (!observer.ok()) return Status(observer.status()).Prepend(q.what_ + ": ");
    q.observer_ = std::move(*observer);
  }
  return q;
}

Status ActivationQuantizer::Observe(const at::Tensor& x) {
  if (!observer_) return OkStatus();
  Status s = observer_->Observe(x);
  return s.ok() ? s : s.Prepend(what_ + ": ");
}

Status ActivationQuantizer::Finish() {
  if (!is_static()) return OkStatus();
  if (observer_) {
    if (observer_->num_batches() == 0) {
      return FailedPreconditionError(what_ + " is static and saw no calibration data");
    }
    auto qp = observer_->ComputeQParams();
    if (!qp.ok()) return Status(qp.status()).Prepend(what_ + ": ");
    qparams_ = std::move(*qp);
  }
  calibrated_ = true;
  return OkStatus();
}

StatusOr<at::Tensor> ActivationQuantizer::Apply(const at::Tensor& x) const {
  if (!spec_) return x;
  StatusOr<at::Tensor> out = at::Tensor();
  if (spec_->is_dynamic) {
    out = quant::FakeQuantizeDynamic(x, *spec_);
  } else {
    if (!calibrated_) {
      return FailedPreconditionError(what_ + " is static and has not been calibrated");
    }
    quant::QParams qp = qparams_;
    if (qp.scale.defined()) qp.scale = qp.scale.to(x.device());
    if (qp.zero_point.defined()) qp.zero_point = qp.zero_point.to(x.device());
    out = quant::FakeQuantize(x, *spec_, qp);
  }
  if (!out.ok()) return Status(out.status()).Prepend(what_ + ": ");
  return out;
}

}  // namespace quantd::quant_modules
