#include "worker/qat/trainable_weight.h"

#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <cmath>

#include "worker/quant/fake_quant.h"

namespace quantd::qat {
namespace {

// The smallest scale quantd's observers produce (qparams.h).
constexpr double kMinScale = 1.1920928955078125e-07;  // 2^-23

// A per-channel parameter shaped to broadcast along `axis` of a
// `dim`-dimensional weight; a per-tensor one as it is.
at::Tensor AlongAxis(const at::Tensor& p, int64_t dim, int64_t axis) {
  if (p.dim() == 0) return p;
  std::vector<int64_t> shape(dim, 1);
  shape[axis] = p.numel();
  return p.reshape(shape);
}

}  // namespace

bool TrainableWeight::CanLearnScale(const quant::QuantSpec& spec) {
  return quant::IsIntType(spec.dtype) && (spec.qscheme == quant::QScheme::kPerTensor ||
                                          spec.qscheme == quant::QScheme::kPerChannel);
}

StatusOr<TrainableWeight> TrainableWeight::Create(const at::Tensor& weight, quant::QuantSpec spec,
                                                  quant::QParams qparams, bool learn_scale,
                                                  const std::string& what) {
  TrainableWeight t;
  t.spec_ = std::move(spec);
  t.qparams_ = std::move(qparams);
  t.latent_ = weight.detach().clone().set_requires_grad(true);
  if (!learn_scale) return t;
  if (!CanLearnScale(t.spec_) || !t.qparams_.scale.defined()) {
    return InvalidArgumentError(what + " (" + quant::DescribeSpec(t.spec_) +
                                ") cannot learn its scale: integer per-tensor or per-channel "
                                "weights only");
  }
  const quant::IntQParamConsts c = quant::IntConstsFor(t.spec_, weight.scalar_type());
  t.qmin_ = c.qmin;
  t.qmax_ = c.qmax;
  int64_t axis = t.spec_.ch_axis.value_or(0);
  if (axis < 0) axis += weight.dim();
  t.axis_ = axis;
  t.scale_ = t.qparams_.scale.detach().to(at::kFloat).clone().set_requires_grad(true);
  t.zero_point_ = t.qparams_.zero_point.defined() ? t.qparams_.zero_point.to(at::kFloat)
                                                  : at::zeros_like(t.scale_).detach();
  const double per_scale = static_cast<double>(weight.numel()) / t.scale_.numel();
  t.grad_scale_ = 1.0 / std::sqrt(per_scale * std::max(1.0f, c.qmax));
  return t;
}

at::Tensor TrainableWeight::LearnedScaleForward() const {
  const int64_t dim = latent_.dim();
  at::Tensor s = AlongAxis(scale_.clamp_min(kMinScale), dim, axis_);
  // Value s exactly, gradient times grad_scale_.
  s = s.detach() + (s - s.detach()) * grad_scale_;
  const at::Tensor z = AlongAxis(zero_point_, dim, axis_);
  const at::Tensor v = latent_ / s + z;
  const at::Tensor r = v + (v.round() - v).detach();
  return (r.clamp(qmin_, qmax_) - z) * s;
}

StatusOr<at::Tensor> TrainableWeight::Forward() const {
  at::AutoGradMode grad(true);
  if (scale_.defined()) return LearnedScaleForward();
  QD_ASSIGN_OR_RETURN(at::Tensor fq, quant::FakeQuantize(latent_.detach(), spec_, qparams_));
  // Value q(W) exactly, gradient passed straight through.
  return fq + (latent_ - latent_.detach());
}

std::vector<at::Tensor> TrainableWeight::Parameters() const {
  std::vector<at::Tensor> p = {latent_};
  if (scale_.defined()) p.push_back(scale_);
  return p;
}

quant::QParams TrainableWeight::FinalQParams() const {
  if (!scale_.defined()) return qparams_;
  quant::QParams qp = qparams_;
  at::Tensor s = scale_.detach().clamp_min(kMinScale).to(at::kFloat).contiguous().clone();
  const quant::ScaleRounding r = quant::ScaleRoundingFor(spec_, latent_.scalar_type());
  if (r != quant::ScaleRounding::kNone) {
    float* p = s.data_ptr<float>();
    for (int64_t i = 0; i < s.numel(); ++i) p[i] = quant::RoundScale(p[i], r);
  }
  qp.scale = s.reshape(qparams_.scale.sizes());
  return qp;
}

StatusOr<at::Tensor> TrainableWeight::Final() const {
  return quant::FakeQuantize(latent_.detach(), spec_, FinalQParams());
}

}  // namespace quantd::qat
