#include "worker/qat/adam.h"

#include <ATen/core/grad_mode.h>

#include <cmath>
#include <utility>

namespace quantd::qat {

Adam::Adam(std::vector<at::Tensor> params) : params_(std::move(params)) {
  for (const at::Tensor& p : params_) {
    m_.push_back(at::zeros_like(p).detach());
    v_.push_back(at::zeros_like(p).detach());
  }
}

void Adam::ZeroGrad() {
  for (at::Tensor& p : params_) {
    if (p.grad().defined()) p.mutable_grad() = at::Tensor();
  }
}

void Adam::Step(double lr) {
  at::NoGradGuard no_grad;
  ++steps_;
  const double c1 = 1 - std::pow(kBeta1, steps_);
  const double c2 = 1 - std::pow(kBeta2, steps_);
  for (size_t i = 0; i < params_.size(); ++i) {
    const at::Tensor g = params_[i].grad();
    if (!g.defined()) continue;
    m_[i].mul_(kBeta1).add_(g, 1 - kBeta1);
    v_[i].mul_(kBeta2).addcmul_(g, g, 1 - kBeta2);
    const at::Tensor denom = (v_[i].sqrt() / std::sqrt(c2)).add_(kEps);
    params_[i].addcdiv_(m_[i], denom, -lr / c1);
  }
}

double CosineLearningRate(double base, int step, int steps) {
  const double progress = static_cast<double>(step - 1) / steps;
  return base * 0.5 * (1 + std::cos(M_PI * progress));
}

}  // namespace quantd::qat
