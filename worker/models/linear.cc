#include "worker/models/linear.h"

namespace quantd::models {

Linear::Linear(LinearLayerInfo info, at::Tensor weight, at::Tensor bias)
    : info_(std::move(info)), weight_(std::move(weight)), bias_(std::move(bias)) {}

at::Tensor Linear::Forward(const at::Tensor& x) const {
  at::Tensor in = x;
  for (const auto& hook : input_hooks_) in = hook(*this, in);
  at::Tensor out =
      kernel_ ? kernel_->Forward(*this, in)
              : (bias_.defined() ? at::linear(in, weight_, bias_) : at::linear(in, weight_));
  for (const auto& hook : output_hooks_) out = hook(*this, out);
  return out;
}

}  // namespace quantd::models
