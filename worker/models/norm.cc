#include "worker/models/norm.h"

namespace quantd::models {

at::Tensor Norm::Forward(const at::Tensor& x) const {
  if (info_.kind == NormKind::kLayerNorm) {
    return at::layer_norm(x, {x.size(-1)}, weight_, bias_, eps_);
  }
  const at::Tensor xf = x.to(at::kFloat);
  const at::Tensor inv = at::rsqrt(xf.pow(2).mean({-1}, /*keepdim=*/true) + eps_);
  if (info_.kind == NormKind::kGemmaRmsNorm) {
    // GemmaRMSNorm: (1 + weight) scales in float32, then the input's dtype.
    return ((xf * inv) * (1.0 + weight_.to(at::kFloat))).to(x.scalar_type());
  }
  return weight_ * (xf * inv).to(x.scalar_type());
}

}  // namespace quantd::models
