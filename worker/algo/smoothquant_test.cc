#include "worker/algo/smoothquant.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "gtest/gtest.h"
#include "worker/algo/activation_quant.h"
#include "worker/algo/channel_scaling.h"
#include "worker/models/registry.h"
#include "worker/quant/fake_quant.h"

namespace quantd::algo {
namespace {

quant::QuantSpec Int8PerChannel() {
  quant::QuantSpec s;
  s.dtype = quant::DataType::kInt8;
  s.qscheme = quant::QScheme::kPerChannel;
  s.ch_axis = 0;
  return s;
}

quant::QuantSpec Int8StaticPerTensor() {
  quant::QuantSpec s;
  s.dtype = quant::DataType::kInt8;
  s.qscheme = quant::QScheme::kPerTensor;
  return s;
}

// ---- float64 reference, written from the paper's formula ----

// s_j = max(amax_j^a / max(max_i,k |W_k[i, j]|, 1e-5)^(1 - a), 1e-5).
std::vector<double> ReferenceScales(const std::vector<double>& amax,
                                    const std::vector<std::vector<std::vector<double>>>& weights,
                                    double alpha) {
  std::vector<double> s(amax.size());
  for (size_t j = 0; j < amax.size(); ++j) {
    double wmax = 0;
    for (const auto& w : weights)
      for (const auto& row : w) wmax = std::max(wmax, std::abs(row[j]));
    wmax = std::max(wmax, 1e-5);
    s[j] = std::max(std::pow(amax[j], alpha) / std::pow(wmax, 1 - alpha), 1e-5);
  }
  return s;
}

// Symmetric int8 per output channel: scale = amax / 127.5, codes
// round-half-even and clamped to [-128, 127].
std::vector<std::vector<double>> ReferenceInt8Codes(const std::vector<std::vector<double>>& w) {
  std::vector<std::vector<double>> codes;
  for (const auto& row : w) {
    double amax = 0;
    for (double v : row) amax = std::max(amax, std::abs(v));
    const double scale = std::max(amax / 127.5, std::ldexp(1.0, -23));
    std::vector<double> c;
    for (double v : row) c.push_back(std::clamp(std::nearbyint(v / scale), -128.0, 127.0));
    codes.push_back(c);
  }
  return codes;
}

std::vector<std::vector<double>> Rows(const at::Tensor& t) {
  at::Tensor d = t.to(at::kDouble).contiguous();
  std::vector<std::vector<double>> r(d.size(0), std::vector<double>(d.size(1)));
  for (int64_t i = 0; i < d.size(0); ++i)
    for (int64_t j = 0; j < d.size(1); ++j) r[i][j] = d.data_ptr<double>()[i * d.size(1) + j];
  return r;
}

TEST(SmoothQuantTest, ScalesAndCodesMatchFloat64Reference) {
  at::manual_seed(3);
  for (double alpha : {0.5, 0.8, 0.25}) {
    const int64_t in = 256;
    at::Tensor x = at::randn({512, in});
    for (int64_t c = 5; c < in; c += 37) x.select(1, c).mul_(40);  // outlier channels
    std::vector<at::Tensor> w = {at::randn({192, in}) * 0.05, at::randn({64, in}) * 0.02,
                                 at::randn({64, in}) * 0.03};
    at::Tensor amax = ChannelAbsMax(x);
    auto s = SmoothQuantScales(amax, w, alpha);
    ASSERT_TRUE(s.ok()) << s.status();

    std::vector<std::vector<std::vector<double>>> wr;
    for (const auto& t : w) wr.push_back(Rows(t));
    std::vector<double> ref = ReferenceScales(Rows(amax.unsqueeze(0))[0], wr, alpha);
    for (int64_t j = 0; j < in; ++j)
      EXPECT_NEAR(s->data_ptr<float>()[j], ref[j], 1e-5 * ref[j]) << "alpha " << alpha;

    // Codes of the smoothed weights W diag(s), quantized int8 per channel.
    int64_t same = 0, total = 0;
    for (size_t k = 0; k < w.size(); ++k) {
      at::Tensor ws = w[k] * s->unsqueeze(0);
      auto qp = quant::ComputeQParams(ws, Int8PerChannel());
      ASSERT_TRUE(qp.ok());
      auto q = quant::FakeQuantize(ws, Int8PerChannel(), *qp);
      ASSERT_TRUE(q.ok());
      auto codes = Rows((*q / qp->scale.reshape({-1, 1})).round());
      std::vector<std::vector<double>> scaled = wr[k];
      for (auto& row : scaled)
        for (int64_t j = 0; j < in; ++j) row[j] *= ref[j];
      auto ref_codes = ReferenceInt8Codes(scaled);
      for (size_t i = 0; i < codes.size(); ++i)
        for (int64_t j = 0; j < in; ++j, ++total) same += codes[i][j] == ref_codes[i][j];
    }
    EXPECT_GE(static_cast<double>(same) / total, 0.999) << "alpha " << alpha;
  }
}

TEST(SmoothQuantTest, RefusesBadShapesAndNonFiniteActivations) {
  EXPECT_EQ(SmoothQuantScales(at::ones({8}), {at::ones({4, 7})}, 0.5).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(SmoothQuantScales(at::ones({8}), {}, 0.5).status().code(),
            StatusCode::kInvalidArgument);
  at::Tensor a = at::ones({8});
  a[2] = std::numeric_limits<float>::infinity();
  EXPECT_EQ(SmoothQuantScales(a, {at::ones({4, 8})}, 0.5).status().code(),
            StatusCode::kInvalidArgument);
}

class NullObserver : public pipeline::JobObserver {};

pipeline::LayerPlanner W8A8(bool static_input) {
  return [static_input](const std::string& name, const std::string&) {
    pipeline::LayerPlan p;
    if (name.rfind("model.layers.", 0) != 0) return p;
    p.weight = Int8PerChannel();
    quant::QuantSpec in = Int8StaticPerTensor();
    in.is_dynamic = !static_input;
    p.input = in;
    return p;
  };
}

// Block 0 of stories260K with inputs given a few outlier channels.
struct BlockFixture {
  std::unique_ptr<models::CausalLM> model;
  std::unique_ptr<models::DecoderBlock> block;
  at::Tensor x;
};

BlockFixture LoadBlock0() {
  BlockFixture f;
  auto model = models::OpenCausalLM("models/stories260K");
  EXPECT_TRUE(model.ok()) << model.status();
  f.model = std::move(*model);
  auto block = f.model->LoadBlock(0);
  EXPECT_TRUE(block.ok()) << block.status();
  f.block = std::move(*block);
  at::manual_seed(5);
  f.x = at::randn({4, 32, 64});
  for (int64_t c : {3, 17, 40}) f.x.select(2, c).mul_(20);
  return f;
}

TEST(SmoothQuantTest, ApplyFoldsTheReferenceScalesAndKeepsTheFunction) {
  BlockFixture f = LoadBlock0();
  const auto planner = W8A8(true);
  auto before = f.block->Forward(f.x);
  ASSERT_TRUE(before.ok());
  const std::string q = "model.layers.0.self_attn.q_proj", gate = "model.layers.0.mlp.gate_proj",
                    down = "model.layers.0.mlp.down_proj";
  auto caps = CaptureLinears(*f.block, f.x, {q, gate, down}, {});
  ASSERT_TRUE(caps.ok());
  at::Tensor q_w = f.block->FindLinear(q)->weight().clone();
  at::Tensor down_w = f.block->FindLinear(down)->weight().clone();
  std::vector<at::Tensor> qkv;
  for (const char* n : {"q_proj", "k_proj", "v_proj"})
    qkv.push_back(f.block->FindLinear(std::string("model.layers.0.self_attn.") + n)->weight());
  auto s_qkv = SmoothQuantScales(ChannelAbsMax(caps->inputs.at(q)), qkv, 0.5);
  auto s_down = SmoothQuantScales(ChannelAbsMax(caps->inputs.at(down)), {down_w}, 0.8);
  ASSERT_TRUE(s_qkv.ok() && s_down.ok());

  SmoothQuantOptions opt;
  opt.alpha_overrides = {{"*.mlp.down_proj", 0.8}};
  SmoothQuantAlgorithm sq(opt);
  NullObserver obs;
  pipeline::BlockAlgorithmContext ctx{*f.model, *f.block, f.x, planner, obs, {}, {}, {}};
  ASSERT_TRUE(sq.Apply(ctx).ok());
  EXPECT_TRUE(
      at::allclose(f.block->FindLinear(q)->weight(), q_w * s_qkv->unsqueeze(0), 1e-5, 1e-7));
  EXPECT_TRUE(
      at::allclose(f.block->FindLinear(down)->weight(), down_w * s_down->unsqueeze(0), 1e-5, 1e-7));
  auto after = f.block->Forward(f.x);
  ASSERT_TRUE(after.ok());
  EXPECT_LT((*after - *before).abs().max().item<float>(), 1e-4);
  EXPECT_TRUE(ctx.quantized_weights.empty());  // rounding is left to the pipeline
}

// The W8A8-quantized block's relative output error.
double QuantizedError(models::DecoderBlock& block, const at::Tensor& x,
                      const pipeline::LayerPlanner& planner, const at::Tensor& ref) {
  auto saved = QuantizeBlockWeights(block, planner);
  EXPECT_TRUE(saved.ok());
  auto q = BlockInputQuantizers::Calibrate(block, x, planner);
  EXPECT_TRUE(q.ok()) << q.status();
  double err;
  {
    ScopedHooks hooks;
    EXPECT_TRUE(q->Install(block, hooks).ok());
    auto out = block.Forward(x);
    EXPECT_TRUE(out.ok());
    err = RelativeMse(*out, ref);
  }
  saved->Restore();
  return err;
}

TEST(AutoSmoothQuantTest, PicksTheGridMinimumOfTheQuantizedBlockError) {
  BlockFixture f = LoadBlock0();
  const auto planner = W8A8(true);
  auto ref = f.block->Forward(f.x);
  ASSERT_TRUE(ref.ok());
  const double unsmoothed = QuantizedError(*f.block, f.x, planner, *ref);

  // The first group (q/k/v after input_layernorm), searched by hand over the
  // same grid with the other groups unsmoothed.
  const models::LinearGroup& g0 = f.block->groups()[0];
  auto caps = CaptureLinears(*f.block, f.x, {g0.linears[0]}, {});
  ASSERT_TRUE(caps.ok());
  std::vector<at::Tensor> w;
  for (const auto& n : g0.linears) w.push_back(f.block->FindLinear(n)->weight());
  double best = std::numeric_limits<double>::infinity(), best_alpha = -1;
  for (int k = 0; k <= 20; ++k) {
    auto again = models::OpenCausalLM("models/stories260K");
    auto b = (*again)->LoadBlock(0);
    auto s = SmoothQuantScales(ChannelAbsMax(caps->inputs.at(g0.linears[0])), w, k * 0.05);
    ASSERT_TRUE(s.ok());
    ASSERT_TRUE(FoldChannelScales(**b, (*b)->groups()[0], *s).ok());
    const double e = QuantizedError(**b, f.x, planner, *ref);
    if (e < best) best = e, best_alpha = k * 0.05;
  }

  AutoSmoothQuantAlgorithm asq;
  NullObserver obs;
  pipeline::BlockAlgorithmContext ctx{*f.model, *f.block, f.x, planner, obs, {}, {}, {}};
  ASSERT_TRUE(asq.Apply(ctx).ok());
  // q/k/v, gate/up and down (o_proj cannot fold with grouped-query attention).
  ASSERT_EQ(asq.chosen().size(), 3u);
  EXPECT_EQ(asq.chosen()[0].first, g0.linears[0]);
  EXPECT_NEAR(asq.chosen()[0].second, best_alpha, 1e-9);
  // Every later group's choice can only lower the error further, and the
  // smoothed block keeps its float function.
  const double searched = QuantizedError(*f.block, f.x, planner, *ref);
  EXPECT_LE(searched, best * (1 + 1e-6));
  EXPECT_LT(searched, unsmoothed);
  auto after = f.block->Forward(f.x);
  EXPECT_LT((*after - *ref).abs().max().item<float>(), 1e-4);
  std::printf(
      "block 0 W8A8 static rel. MSE: unsmoothed %.4g, group 0 best (alpha %.2f) %.4g, "
      "searched %.4g\n",
      unsmoothed, best_alpha, best, searched);
}

TEST(AutoSmoothQuantTest, RefusesAnEmptyGrid) {
  BlockFixture f = LoadBlock0();
  AutoSmoothQuantOptions o;
  o.alpha_step = 0;
  AutoSmoothQuantAlgorithm asq(o);
  NullObserver obs;
  const auto planner = W8A8(true);
  pipeline::BlockAlgorithmContext ctx{*f.model, *f.block, f.x, planner, obs, {}, {}, {}};
  EXPECT_EQ(asq.Apply(ctx).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace quantd::algo
