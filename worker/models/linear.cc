#include "worker/models/linear.h"

#include "worker/models/matmul_dtype.h"

namespace quantd::models {
namespace {

// `source` in dtype t, reusing `copy` while source is the same tensor at the
// same version.
const at::Tensor& CopyIn(const at::Tensor& source, at::ScalarType t, at::Tensor& copy,
                         at::Tensor& copy_source, int64_t& copy_version) {
  if (!copy.defined() || copy.scalar_type() != t || !copy_source.is_same(source) ||
      copy_version != source._version()) {
    copy = source.to(t);
    copy_source = source;
    copy_version = source._version();
  }
  return copy;
}

}  // namespace

const at::Tensor& Linear::WeightIn(at::ScalarType t) const {
  return CopyIn(weight_, t, weight_copy_, weight_copy_source_, weight_copy_version_);
}

const at::Tensor& Linear::BiasIn(at::ScalarType t) const {
  return CopyIn(bias_, t, bias_copy_, bias_copy_source_, bias_copy_version_);
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
    out = (bias_.defined() ? at::linear(x_t, WeightIn(*t), BiasIn(*t))
                           : at::linear(x_t, WeightIn(*t)))
              .to(in.scalar_type());
  } else {
    out = bias_.defined() ? at::linear(in, weight_, bias_) : at::linear(in, weight_);
  }
  for (const auto& hook : output_hooks_) out = hook(*this, out);
  return out;
}

}  // namespace quantd::models
