#include "worker/models/linear.h"

#include "worker/models/matmul_dtype.h"

namespace quantd::models {

const at::Tensor& Linear::DtypeCopy::Of(const at::Tensor& from, at::ScalarType t) {
  if (!copy.defined() || copy.scalar_type() != t || !source.is_same(from) ||
      version != from._version()) {
    copy = from.to(t);
    source = from;
    version = from._version();
  }
  return copy;
}

Linear::Linear(LinearLayerInfo info, at::Tensor weight, at::Tensor bias)
    : info_(std::move(info)), weight_(std::move(weight)), bias_(std::move(bias)) {}

at::Tensor Linear::Forward(const at::Tensor& x) const {
  at::Tensor in = x;
  for (const auto& hook : input_hooks_) in = hook(*this, in);
  at::Tensor out;
  const std::optional<at::ScalarType> t = MatmulDtype();
  if (kernel_) {
    out = kernel_->Forward(*this, in);
  } else if (t && *t != in.scalar_type()) {
    const at::Tensor x_t = in.to(*t);
    const at::Tensor& w = weight_copy_.Of(weight_, *t);
    out = (bias_.defined() ? at::linear(x_t, w, bias_copy_.Of(bias_, *t)) : at::linear(x_t, w))
              .to(in.scalar_type());
  } else {
    out = bias_.defined() ? at::linear(in, weight_, bias_) : at::linear(in, weight_);
  }
  for (const auto& hook : output_hooks_) out = hook(*this, out);
  return out;
}

}  // namespace quantd::models
