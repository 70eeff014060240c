// The float16 and bfloat16 "quantization" of the reference: a cast to the
// narrower float and back, rounding to nearest even; NaN and Inf pass
// through. Fused CPU kernel, scalar `Ref` twin and composed-ATen version
// (x.to(dtype).to(x.dtype())) agree bit for bit.
#ifndef QUANTD_WORKER_QUANT_CAST_H_
#define QUANTD_WORKER_QUANT_CAST_H_

#include <ATen/ATen.h>

#include "worker/common/status.h"
#include "worker/quant/spec.h"

namespace quantd::quant::cast {

Status FakeQuantFused(const at::Tensor& x, const QuantSpec& spec, at::Tensor& out);
Status FakeQuantRef(const at::Tensor& x, const QuantSpec& spec, at::Tensor& out);
StatusOr<at::Tensor> FakeQuantComposed(const at::Tensor& x, const QuantSpec& spec);

// The ATen dtype of a cast spec (kHalf / kBFloat16).
at::ScalarType TargetDtype(const QuantSpec& spec);

}  // namespace quantd::quant::cast

#endif  // QUANTD_WORKER_QUANT_CAST_H_
