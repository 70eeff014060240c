#include "worker/quant_modules/module_weight.h"

#include <utility>

#include "worker/quant/fake_quant.h"

namespace quantd::quant_modules {

StatusOr<ModuleWeight> ModuleWeight::Create(at::Tensor tensor, std::optional<quant::QuantSpec> spec,
                                            std::string what) {
  ModuleWeight w;
  w.float_ = std::move(tensor);
  w.what_ = std::move(what);
  if (!w.float_.defined()) return w;
  w.spec_ = std::move(spec);
  if (!w.spec_) return w;
  auto qp = quant::ComputeQParams(w.float_, *w.spec_);
  if (!qp.ok()) return Status(qp.status()).Prepend(w.what_ + ": ");
  w.qparams_ = std::move(*qp);
  auto fake = quant::FakeQuantize(w.float_, *w.spec_, w.qparams_);
  if (!fake.ok()) return Status(fake.status()).Prepend(w.what_ + ": ");
  w.fake_ = std::move(*fake);
  return w;
}

StatusOr<ModuleWeight> ModuleWeight::CreateFitted(at::Tensor tensor, at::Tensor fake,
                                                  quant::QuantSpec spec, quant::QParams qparams,
                                                  std::string what) {
  if (!tensor.defined() || !fake.defined() || !tensor.sizes().equals(fake.sizes())) {
    return InvalidArgumentError(what + ": the fitted weight's shape differs from the weight's");
  }
  ModuleWeight w;
  w.float_ = std::move(tensor);
  w.fake_ = std::move(fake);
  w.spec_ = std::move(spec);
  w.qparams_ = std::move(qparams);
  w.what_ = std::move(what);
  return w;
}

StatusOr<at::Tensor> ModuleWeight::Effective(at::ScalarType dtype, const at::Device& device) const {
  if (frozen_) {
    auto w = frozen_->Dequantize(at::kFloat);
    if (!w.ok()) return Status(w.status()).Prepend(what_ + ": ");
    return w->to(device, dtype);
  }
  if (!float_.defined()) return at::Tensor();
  return (spec_ ? fake_ : float_).to(device, dtype);
}

Status ModuleWeight::Freeze(pipeline::FreezeReport& report) {
  if (!spec_ || frozen_ || !float_.defined()) return OkStatus();
  // The codes of the fake-quantized tensor: they dequantize to exactly what
  // the forward used.
  QD_ASSIGN_OR_RETURN(auto frozen, pipeline::FreezeWeight(fake_, *spec_, qparams_, what_));
  if (!frozen) {
    report.kept_float.push_back(what_);
    return OkStatus();
  }
  ++report.layers;
  report.float_bytes += float_.numel() * float_.element_size();
  report.frozen_bytes += frozen->bytes();
  report.packed_bytes += frozen->packed_bytes();
  frozen_ = std::move(frozen);
  float_ = at::Tensor();
  fake_ = at::Tensor();
  return OkStatus();
}

int64_t ModuleWeight::bytes() const {
  if (frozen_) return frozen_->bytes();
  return float_.defined() ? float_.numel() * float_.element_size() : 0;
}

}  // namespace quantd::quant_modules
