// TrainableWeight and Adam against float64 references: the straight-through
// forward is quantd's fake quantization and passes gradients unchanged; the
// learned-scale forward equals it at the observer's scale and gives LSQ's
// gradients; Adam's first steps follow the textbook update.
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>

#include <cmath>

#include "worker/qat/adam.h"
#include "worker/qat/trainable_weight.h"
#include "worker/quant/fake_quant.h"

namespace quantd::qat {
namespace {

quant::QuantSpec Int4PerChannel() {
  quant::QuantSpec s;
  s.dtype = quant::DataType::kInt4;
  s.qscheme = quant::QScheme::kPerChannel;
  s.ch_axis = 0;
  return s;
}

TEST(TrainableWeightTest, StraightThroughForwardIsFakeQuantAndPassesGradients) {
  at::manual_seed(1);
  const at::Tensor w = at::randn({8, 16});
  const quant::QuantSpec spec = Int4PerChannel();
  auto qp = quant::ComputeQParams(w, spec);
  ASSERT_TRUE(qp.ok());
  auto t = TrainableWeight::Create(w, spec, *qp, /*learn_scale=*/false, "w");
  ASSERT_TRUE(t.ok());
  auto y = t->Forward();
  ASSERT_TRUE(y.ok());
  const at::Tensor want = *quant::FakeQuantize(w, spec, *qp);
  EXPECT_TRUE(at::equal(y->detach(), want));
  const at::Tensor g = at::randn({8, 16});
  {
    at::AutoGradMode grad(true);
    (*y * g).sum().backward();
  }
  EXPECT_TRUE(at::equal(t->latent().grad(), g));
  EXPECT_TRUE(at::equal(*t->Final(), want));
}

TEST(TrainableWeightTest, LearnedScaleMatchesFakeQuantAndHasLsqGradients) {
  at::manual_seed(2);
  const at::Tensor w = at::randn({4, 32});
  const quant::QuantSpec spec = Int4PerChannel();
  auto qp = quant::ComputeQParams(w, spec);
  ASSERT_TRUE(qp.ok());
  auto t = TrainableWeight::Create(w, spec, *qp, /*learn_scale=*/true, "w");
  ASSERT_TRUE(t.ok());
  auto y = t->Forward();
  ASSERT_TRUE(y.ok());
  // Same values as quantd's fake quantization up to the division's last
  // bit: w / s against w * (1 / s) can round a half the other way.
  const at::Tensor want = *quant::FakeQuantize(w, spec, *qp);
  const at::Tensor s = qp->scale.reshape({4, 1});
  EXPECT_LE((y->detach() - want).abs().div(s).max().item<double>(), 1.0 + 1e-6);
  EXPECT_GE((y->detach() == want).to(at::kDouble).mean().item<double>(), 0.99);
  {
    at::AutoGradMode grad(true);
    y->sum().backward();
  }
  // d/dw: 1 inside the clipping range, 0 outside (int4: [-8, 7]).
  // In float32, as the forward divides: the row's largest element sits at
  // exactly +-7.5, where float and double may round apart.
  const at::Tensor v = (w / s).to(at::kDouble);
  const at::Tensor inside = (v.round() >= -8) & (v.round() <= 7);
  EXPECT_TRUE(at::equal(t->latent().grad(), inside.to(at::kFloat)));
  // d/ds, summed over a row: (round(v) - v) inside, the clip bound outside,
  // times the gradient scale 1 / sqrt(32 * 7).
  const at::Tensor per = at::where(inside, v.round() - v, v.round().clamp(-8, 7));
  const at::Tensor ds = per.sum(1) / std::sqrt(32.0 * 7.0);
  const std::vector<at::Tensor> params = t->Parameters();
  ASSERT_EQ(params.size(), 2u);
  const at::Tensor got = params[1].grad().to(at::kDouble);
  // A float32 sum of 32 terms of size <= 8: good to ~32 * 8 * 2^-24.
  EXPECT_LE((got - ds).abs().max().item<double>(), 32 * 8 * 6e-8 + 1e-6);
}

TEST(TrainableWeightTest, RefusesLearnedScalesForFormatsWithoutThem) {
  quant::QuantSpec fp8;
  fp8.dtype = quant::DataType::kFp8E4M3;
  const at::Tensor w = at::randn({4, 8});
  auto qp = quant::ComputeQParams(w, fp8);
  ASSERT_TRUE(qp.ok());
  auto t = TrainableWeight::Create(w, fp8, *qp, /*learn_scale=*/true, "layer.weight");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("layer.weight"), std::string::npos);
  EXPECT_TRUE(TrainableWeight::Create(w, fp8, *qp, false, "layer.weight").ok());
}

TEST(AdamTest, FollowsTheTextbookUpdate) {
  at::Tensor p = at::tensor({1.0, -2.0}, at::kDouble).set_requires_grad(true);
  Adam adam({p});
  double m[2] = {0, 0}, v[2] = {0, 0}, ref[2] = {1.0, -2.0};
  const double grads[3][2] = {{0.5, -1.0}, {0.25, 2.0}, {-1.0, 0.1}};
  for (int step = 1; step <= 3; ++step) {
    adam.ZeroGrad();
    p.mutable_grad() = at::tensor({grads[step - 1][0], grads[step - 1][1]}, at::kDouble);
    adam.Step(0.01);
    for (int i = 0; i < 2; ++i) {
      const double g = grads[step - 1][i];
      m[i] = 0.9 * m[i] + 0.1 * g;
      v[i] = 0.999 * v[i] + 0.001 * g * g;
      const double mh = m[i] / (1 - std::pow(0.9, step));
      const double vh = v[i] / (1 - std::pow(0.999, step));
      ref[i] -= 0.01 * mh / (std::sqrt(vh) + 1e-8);
    }
  }
  // The same float64 operations in another order: a few ulps.
  EXPECT_NEAR(p[0].item<double>(), ref[0], 1e-12);
  EXPECT_NEAR(p[1].item<double>(), ref[1], 1e-12);
  EXPECT_EQ(adam.steps(), 3);
}

TEST(AdamTest, CosineScheduleStartsAtTheBaseAndDecays) {
  EXPECT_DOUBLE_EQ(CosineLearningRate(0.1, 1, 100), 0.1);
  EXPECT_NEAR(CosineLearningRate(0.1, 51, 100), 0.05, 1e-15);
  EXPECT_LT(CosineLearningRate(0.1, 100, 100), 0.1 * 1e-3);
}

}  // namespace
}  // namespace quantd::qat
