// Norm: an RMSNorm or LayerNorm of a loaded model, with mutable parameters.
//
// SmoothQuant and AWQ fold per-channel scales into the norm that feeds a
// group of linears, and rotation (QuaRot) folds the norm weight into the
// following linears, so the weight (and LayerNorm bias) are exposed as plain
// tensors.
#ifndef QUANTD_WORKER_MODELS_NORM_H_
#define QUANTD_WORKER_MODELS_NORM_H_

#include <ATen/ATen.h>

#include "worker/models/layer_shapes.h"

namespace quantd::models {

class Norm {
 public:
  // `bias` is undefined for RMSNorm.
  Norm(NormInfo info, at::Tensor weight, at::Tensor bias, double eps)
      : info_(std::move(info)), weight_(std::move(weight)), bias_(std::move(bias)), eps_(eps) {}

  const NormInfo& info() const { return info_; }
  const std::string& name() const { return info_.name; }
  NormKind kind() const { return info_.kind; }
  double eps() const { return eps_; }
  at::Tensor& weight() { return weight_; }
  const at::Tensor& weight() const { return weight_; }
  at::Tensor& bias() { return bias_; }
  const at::Tensor& bias() const { return bias_; }

  // Normalises over the last dimension. RMSNorm computes its statistics in
  // float32 and scales in the input dtype, as the reference implementation;
  // Gemma's scales by (1 + weight) in float32.
  at::Tensor Forward(const at::Tensor& x) const;

 private:
  NormInfo info_;
  at::Tensor weight_;
  at::Tensor bias_;
  double eps_;
};

}  // namespace quantd::models

#endif  // QUANTD_WORKER_MODELS_NORM_H_
