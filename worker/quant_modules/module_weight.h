// ModuleWeight: a quantized module's weight or bias. Until frozen it keeps
// the float tensor and its fake-quantized copy (parameters computed once
// from the tensor with the spec's observer); frozen, only the real-quantized
// codes and parameters (pipeline::FrozenWeight), dequantized at every
// forward to exactly the fake-quantized values.
#ifndef QUANTD_WORKER_QUANT_MODULES_MODULE_WEIGHT_H_
#define QUANTD_WORKER_QUANT_MODULES_MODULE_WEIGHT_H_

#include <ATen/ATen.h>

#include <optional>
#include <string>

#include "worker/common/status.h"
#include "worker/pipeline/freeze.h"
#include "worker/quant/qparams.h"
#include "worker/quant/spec.h"

namespace quantd::quant_modules {

class ModuleWeight {
 public:
  ModuleWeight() = default;
  // `tensor` may be undefined (a module without bias); `spec` empty keeps it
  // float. `what` names it in errors, e.g. "model.conv_in weight".
  // INVALID_ARGUMENT when the tensor does not fit the spec.
  static StatusOr<ModuleWeight> Create(at::Tensor tensor, std::optional<quant::QuantSpec> spec,
                                       std::string what);
  // A weight an algorithm fitted (GPTQ): `fake` is its fake-quantized value,
  // quantized with `qparams`. INVALID_ARGUMENT when the shapes differ.
  static StatusOr<ModuleWeight> CreateFitted(at::Tensor tensor, at::Tensor fake,
                                             quant::QuantSpec spec, quant::QParams qparams,
                                             std::string what);

  bool defined() const { return float_.defined() || frozen_.has_value(); }
  bool quantized() const { return spec_.has_value(); }
  bool frozen() const { return frozen_.has_value(); }
  // What the forward uses, in `dtype` on `device`: the fake-quantized tensor,
  // the dequantized codes once frozen, or the float tensor without a spec.
  // Undefined for an undefined tensor.
  StatusOr<at::Tensor> Effective(at::ScalarType dtype, const at::Device& device) const;
  // The parameters the tensor is quantized with (empty without a spec).
  const quant::QParams& qparams() const { return qparams_; }
  // Keeps only the codes when they dequantize to the fake-quantized tensor
  // bit for bit; otherwise stays float and is listed in kept_float.
  Status Freeze(pipeline::FreezeReport& report);
  // Bytes held for the forward: the float tensor, or the codes and
  // parameters once frozen.
  int64_t bytes() const;

 private:
  at::Tensor float_;
  at::Tensor fake_;
  std::optional<quant::QuantSpec> spec_;
  quant::QParams qparams_;
  std::optional<pipeline::FrozenWeight> frozen_;
  std::string what_;
};

}  // namespace quantd::quant_modules

#endif  // QUANTD_WORKER_QUANT_MODULES_MODULE_WEIGHT_H_
