#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "worker/config/quark_json.h"
#include "worker/job_spec/quantization_settings.h"
#include "worker/quant/fake_quant.h"
#include "worker/quant_modules/quant_conv.h"
#include "worker/quant_modules/quant_embedding_bag.h"

namespace quantd::quant_modules {
namespace {

using quant::DataType;
using quant::QScheme;
using quant::QuantSpec;

QuantSpec Int(DataType t, QScheme scheme, bool symmetric = true, bool dynamic = false) {
  QuantSpec s;
  s.dtype = t;
  s.qscheme = scheme;
  s.symmetric = symmetric;
  s.is_dynamic = dynamic;
  return s;
}

double MaxAbs(const at::Tensor& t) { return t.abs().max().item<double>(); }

// The plan of a Conv2d as the service resolves it from a Quark JSON config:
// int8 per-channel weights, static int8 per-tensor input and output.
pipeline::LayerPlan ConvPlanFromConfig() {
  auto c = config::ParseQuarkJson(R"({
    "global_quant_config": {"weight": {"dtype": "int4", "qscheme": "per_group", "group_size": 32,
                                       "ch_axis": -1, "symmetric": true, "is_dynamic": false}},
    "layer_type_quant_config": {"Conv2d": {
      "weight": {"dtype": "int8", "qscheme": "per_channel", "ch_axis": 0, "symmetric": true,
                 "is_dynamic": false},
      "input_tensors": {"dtype": "int8", "qscheme": "per_tensor", "symmetric": true,
                        "is_dynamic": false},
      "output_tensors": {"dtype": "int8", "qscheme": "per_tensor", "symmetric": false,
                         "is_dynamic": false}}}})");
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? job_spec::PlannerFor(*c)("model.conv_in", "Conv2d") : pipeline::LayerPlan();
}

std::vector<at::Tensor> ConvBatches() {
  at::manual_seed(3);
  return {at::randn({2, 3, 10, 10}), at::randn({2, 3, 10, 10}) * 2.5,
          at::randn({1, 3, 10, 10}) * 0.5};
}

TEST(QuantConvTest, Conv2dFollowsTheResolvedConfigAndMatchesAFloat64Reference) {
  const pipeline::LayerPlan plan = ConvPlanFromConfig();
  ASSERT_TRUE(plan.weight && plan.input && plan.output);
  EXPECT_EQ(plan.weight->dtype, DataType::kInt8);
  EXPECT_EQ(plan.weight->qscheme, QScheme::kPerChannel);
  at::manual_seed(1);
  const at::Tensor w = at::randn({8, 3, 3, 3}) * 0.2, b = at::randn({8}) * 0.1;
  ConvOptions o;
  o.padding = {1, 1};
  auto m = QuantConv::Create(ConvKind::kConv2d, "model.conv_in", w, b, o, plan);
  ASSERT_TRUE(m.ok()) << m.status();
  const std::vector<at::Tensor> batches = ConvBatches();
  ASSERT_TRUE((*m)->Calibrate(batches).ok());

  // The running observer's input scale is the one-shot scale of all batches.
  std::vector<at::Tensor> flat;
  for (const auto& x : batches) flat.push_back(x.reshape({-1}));
  auto once = quant::ComputeQParams(at::cat(flat), *plan.input);
  ASSERT_TRUE(once.ok());
  EXPECT_TRUE(at::equal((*m)->input().qparams().scale, once->scale));
  EXPECT_EQ((*m)->weight().qparams().scale.sizes(), at::IntArrayRef({8}));

  // Forward = conv of the fake-quantized operands (float64 reference),
  // then the static output quantizer.
  const at::Tensor x = at::randn({2, 3, 10, 10}) * 1.5;
  auto y = (*m)->Forward(x);
  ASSERT_TRUE(y.ok()) << y.status();
  const at::Tensor xq = *quant::FakeQuantize(x, *plan.input, (*m)->input().qparams());
  const at::Tensor wq =
      *quant::FakeQuantize(w, *plan.weight, *quant::ComputeQParams(w, *plan.weight));
  const at::Tensor ref =
      at::conv2d(xq.to(at::kDouble), wq.to(at::kDouble), b.to(at::kDouble), {1, 1}, {1, 1});
  const at::Tensor ref_q =
      *quant::FakeQuantize(ref.to(at::kFloat), *plan.output, (*m)->output().qparams());
  // Output steps are the output scale; float32 vs float64 sums may land on
  // the other side of a step only where the value sits on a rounding tie.
  const double step = (*m)->output().qparams().scale.item<double>();
  EXPECT_LE(MaxAbs(*y - ref_q), step * 1.0001);
  EXPECT_GT((*y - ref_q).eq(0).to(at::kDouble).mean().item<double>(), 0.999);
  // Quantization changed the result against the float convolution.
  const at::Tensor float_y = at::conv2d(x, w, b, {1, 1}, {1, 1});
  EXPECT_GT(MaxAbs(*y - float_y), 1e-3);
  EXPECT_LT(MaxAbs(*y - float_y), 0.05 * MaxAbs(float_y));
}

TEST(QuantConvTest, StaticOutputScaleIsTheOneShotScaleOfTheQuantizedOutputs) {
  pipeline::LayerPlan plan = ConvPlanFromConfig();
  pipeline::LayerPlan no_output = plan;
  no_output.output.reset();
  at::manual_seed(2);
  const at::Tensor w = at::randn({4, 3, 3, 3}) * 0.3;
  auto m = QuantConv::Create(ConvKind::kConv2d, "c", w, at::Tensor(), {}, plan);
  auto twin = QuantConv::Create(ConvKind::kConv2d, "c", w, at::Tensor(), {}, no_output);
  ASSERT_TRUE(m.ok() && twin.ok());
  const std::vector<at::Tensor> batches = ConvBatches();
  ASSERT_TRUE((*m)->Calibrate(batches).ok());
  ASSERT_TRUE((*twin)->Calibrate(batches).ok());
  std::vector<at::Tensor> outs;
  for (const auto& x : batches) outs.push_back((*(*twin)->Forward(x)).reshape({-1}));
  auto once = quant::ComputeQParams(at::cat(outs), *plan.output);
  ASSERT_TRUE(once.ok());
  EXPECT_TRUE(at::equal((*m)->output().qparams().scale, once->scale));
  EXPECT_TRUE(at::equal((*m)->output().qparams().zero_point, once->zero_point));
  const at::Tensor x = batches[1];
  const at::Tensor want =
      *quant::FakeQuantize(*(*twin)->Forward(x), *plan.output, (*m)->output().qparams());
  EXPECT_TRUE(at::equal(*(*m)->Forward(x), want));
}

TEST(QuantConvTest, ConvTranspose2dQuantizesOutputChannelsOnAxisOne) {
  pipeline::LayerPlan plan;
  plan.weight = Int(DataType::kInt8, QScheme::kPerChannel);  // no ch_axis: axis 1
  plan.input = Int(DataType::kInt8, QScheme::kPerTensor, true, /*dynamic=*/true);
  at::manual_seed(4);
  // [in 4, out / groups 3, 3, 3] with groups 2: 6 output channels.
  at::Tensor w = at::randn({4, 3, 3, 3}) * 0.2;
  w.select(1, 2).mul_(10);  // one output channel (per group) much larger
  const at::Tensor b = at::randn({6}) * 0.1;
  ConvOptions o;
  o.stride = {2, 2};
  o.padding = {1, 1};
  o.output_padding = {1, 1};
  o.groups = 2;
  auto m = QuantConv::Create(ConvKind::kConvTranspose2d, "model.up", w, b, o, plan);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ((*m)->in_channels(), 4);
  EXPECT_EQ((*m)->out_channels(), 6);
  const at::Tensor scale = (*m)->weight().qparams().scale;
  ASSERT_EQ(scale.sizes(), at::IntArrayRef({3}));
  // Each scale covers its output channel: the large channel's is ~10x.
  EXPECT_GT(scale[2].item<float>(), 5 * scale[0].item<float>());
  for (int c = 0; c < 3; ++c) {
    const double amax = w.select(1, c).abs().max().item<double>();
    EXPECT_NEAR(scale[c].item<double>(), amax / 127.5, amax / 127.5 * 0.01 + 1e-9) << c;
  }
  ASSERT_TRUE((*m)->Calibrate({at::randn({1, 4, 5, 5})}).ok());  // nothing static: no-op
  const at::Tensor x = at::randn({2, 4, 5, 5});
  auto y = (*m)->Forward(x);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->sizes(), at::IntArrayRef({2, 6, 10, 10}));
  quant::QuantSpec wspec = *plan.weight;
  wspec.ch_axis = 1;
  const at::Tensor xq = *quant::FakeQuantizeDynamic(x, *plan.input);
  const at::Tensor wq = *quant::FakeQuantize(w, wspec, *quant::ComputeQParams(w, wspec));
  const at::Tensor ref = at::conv_transpose2d(xq.to(at::kDouble), wq.to(at::kDouble),
                                              b.to(at::kDouble), {2, 2}, {1, 1}, {1, 1}, 2);
  EXPECT_LT(MaxAbs(y->to(at::kDouble) - ref), 1e-5 * MaxAbs(ref));
}

TEST(QuantConvTest, FrozenConvHoldsInt4CodesAndGivesTheSameOutputs) {
  pipeline::LayerPlan plan;
  plan.weight = Int(DataType::kInt4, QScheme::kPerChannel);
  at::manual_seed(6);
  const at::Tensor w = at::randn({16, 8, 3, 3}) * 0.1;
  auto m = QuantConv::Create(ConvKind::kConv2d, "c", w, at::randn({16}), {}, plan);
  ASSERT_TRUE(m.ok());
  const at::Tensor x = at::randn({2, 8, 7, 7});
  const at::Tensor before = *(*m)->Forward(x);
  const int64_t float_bytes = (*m)->weight().bytes();
  auto report = (*m)->Freeze();
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->layers, 1);
  EXPECT_TRUE(report->kept_float.empty());
  EXPECT_TRUE((*m)->weight().frozen());
  EXPECT_EQ(float_bytes, 16 * 8 * 9 * 4);
  EXPECT_LE((*m)->weight().bytes(), 0.3 * float_bytes);
  EXPECT_EQ(report->frozen_bytes, (*m)->weight().bytes());
  EXPECT_TRUE(at::equal(*(*m)->Forward(x), before));
}

TEST(QuantConvTest, BadInputsAreInvalidArgumentsNamingTheModule) {
  pipeline::LayerPlan plan;
  plan.weight = Int(DataType::kInt8, QScheme::kPerChannel);
  plan.output = Int(DataType::kInt8, QScheme::kPerTensor);  // static, not calibrated
  auto m = QuantConv::Create(ConvKind::kConv2d, "model.conv_in", at::randn({4, 3, 3, 3}),
                             at::Tensor(), {}, plan);
  ASSERT_TRUE(m.ok());
  auto wrong = (*m)->Forward(at::randn({1, 5, 8, 8}));
  EXPECT_EQ(wrong.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(wrong.status().message().find("model.conv_in"), std::string::npos);
  auto uncalibrated = (*m)->Forward(at::randn({1, 3, 8, 8}));
  EXPECT_EQ(uncalibrated.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(uncalibrated.status().message().find("model.conv_in output"), std::string::npos);

  EXPECT_EQ(QuantConv::Create(ConvKind::kConv2d, "c", at::randn({4, 3}), at::Tensor(), {}, plan)
                .status()
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(
      QuantConv::Create(ConvKind::kConv2d, "c", at::randn({4, 3, 3, 3}), at::randn({5}), {}, plan)
          .status()
          .code(),
      StatusCode::kInvalidArgument);
  ConvOptions three_groups;
  three_groups.groups = 3;  // 4 output channels
  auto bad_groups = QuantConv::Create(ConvKind::kConv2d, "c", at::randn({4, 1, 3, 3}), at::Tensor(),
                                      three_groups, plan);
  EXPECT_EQ(bad_groups.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad_groups.status().message().find("4 output channels"), std::string::npos);
  pipeline::LayerPlan grouped;
  grouped.weight = Int(DataType::kInt4, QScheme::kPerGroup);
  grouped.weight->group_size = 5;  // does not divide kw = 3
  grouped.weight->ch_axis = -1;
  auto bad_spec =
      QuantConv::Create(ConvKind::kConv2d, "c", at::randn({4, 3, 3, 3}), at::Tensor(), {}, grouped);
  EXPECT_EQ(bad_spec.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad_spec.status().message().find("c weight"), std::string::npos) << bad_spec.status();
}

Bags MakeBags(std::vector<int64_t> ids, std::vector<int64_t> offsets) {
  return {at::tensor(ids, at::kLong), at::tensor(offsets, at::kLong)};
}

TEST(QuantEmbeddingBagTest, EveryModeIsTheBagOfTheFakeQuantizedTableThenTheOutputQuantizer) {
  pipeline::LayerPlan plan;
  plan.weight = Int(DataType::kUInt4, QScheme::kPerGroup, /*symmetric=*/false);
  plan.weight->group_size = 16;
  plan.weight->ch_axis = -1;
  plan.output = Int(DataType::kInt8, QScheme::kPerTensor);
  at::manual_seed(7);
  const at::Tensor table = at::randn({50, 16});
  const std::vector<Bags> calib = {MakeBags({1, 2, 3, 40, 41}, {0, 3}),
                                   MakeBags({7, 7, 9, 0}, {0, 1, 2})};
  const Bags bags = MakeBags({4, 5, 6, 10, 11, 49, 0}, {0, 2, 3, 6});
  const at::Tensor tq =
      *quant::FakeQuantize(table, *plan.weight, *quant::ComputeQParams(table, *plan.weight));
  for (BagMode mode : {BagMode::kSum, BagMode::kMean, BagMode::kMax}) {
    auto m = QuantEmbeddingBag::Create("model.bag", table, mode, plan);
    ASSERT_TRUE(m.ok()) << m.status();
    ASSERT_TRUE((*m)->Calibrate(calib).ok());
    const int64_t torch_mode = mode == BagMode::kSum ? 0 : mode == BagMode::kMean ? 1 : 2;
    const at::Tensor bag =
        std::get<0>(at::embedding_bag(tq, bags.indices, bags.offsets, false, torch_mode));
    const at::Tensor want = *quant::FakeQuantize(bag, *plan.output, (*m)->output().qparams());
    auto y = (*m)->Forward(bags);
    ASSERT_TRUE(y.ok()) << y.status();
    EXPECT_EQ(y->sizes(), at::IntArrayRef({4, 16}));
    EXPECT_TRUE(at::equal(*y, want)) << torch_mode;

    // Frozen: 4-bit codes and group parameters, the same outputs.
    const int64_t float_bytes = (*m)->weight().bytes();
    auto report = (*m)->Freeze();
    ASSERT_TRUE(report.ok()) << report.status();
    EXPECT_EQ(report->layers, 1);
    EXPECT_LE((*m)->weight().bytes(), 0.3 * float_bytes);
    EXPECT_TRUE(at::equal(*(*m)->Forward(bags), want)) << torch_mode;
  }
}

// Sum bags with per-sample weights against a float64 reference: each bag is
// the sum of its fake-quantized rows times their weights.
TEST(QuantEmbeddingBagTest, PerSampleWeightsScaleTheFakeQuantizedRows) {
  pipeline::LayerPlan plan;
  plan.weight = Int(DataType::kInt8, QScheme::kPerChannel);
  at::manual_seed(8);
  const at::Tensor table = at::randn({30, 8});
  Bags bags = MakeBags({3, 4, 5, 29, 0, 0, 7}, {0, 3, 4});
  bags.per_sample_weights = at::randn({7});
  auto m = QuantEmbeddingBag::Create("model.bag", table, BagMode::kSum, plan);
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_TRUE((*m)->Calibrate({bags}).ok());
  auto y = (*m)->Forward(bags);
  ASSERT_TRUE(y.ok()) << y.status();
  const at::Tensor tq =
      *quant::FakeQuantize(table, *plan.weight, *quant::ComputeQParams(table, *plan.weight));
  const int64_t starts[] = {0, 3, 4, 7};
  at::Tensor ref = at::zeros({3, 8}, at::kDouble);
  for (int bag = 0; bag < 3; ++bag) {
    for (int64_t i = starts[bag]; i < starts[bag + 1]; ++i) {
      ref[bag] += tq[bags.indices[i].item<int64_t>()].to(at::kDouble) *
                  bags.per_sample_weights[i].item<double>();
    }
  }
  // Float32 sums of at most three products: within 4 ulps of the largest term.
  EXPECT_LT(MaxAbs(y->to(at::kDouble) - ref),
            4 * 1.2e-7 * 3 * MaxAbs(tq) * MaxAbs(bags.per_sample_weights));
  // Weights with a mean bag, or one too few, are refused.
  Bags few = bags;
  few.per_sample_weights = at::randn({6});
  EXPECT_EQ((*m)->Forward(few).status().code(), StatusCode::kInvalidArgument);
  auto mean = QuantEmbeddingBag::Create("model.bag", table, BagMode::kMean, plan);
  ASSERT_TRUE(mean.ok());
  ASSERT_TRUE((*mean)->Calibrate({MakeBags({1}, {0})}).ok());
  EXPECT_EQ((*mean)->Forward(bags).status().code(), StatusCode::kInvalidArgument);
}

// Conv2d with groups, stride, padding and dilation against a float64
// reference convolution of the fake-quantized operands.
TEST(QuantConvTest, GroupedStridedDilatedConv2dMatchesAFloat64Reference) {
  pipeline::LayerPlan plan;
  plan.weight = Int(DataType::kInt8, QScheme::kPerChannel);
  plan.input = Int(DataType::kInt8, QScheme::kPerTensor, true, /*dynamic=*/true);
  at::manual_seed(9);
  const at::Tensor w = at::randn({6, 2, 3, 3}) * 0.3;  // 4 inputs, groups 2
  const at::Tensor b = at::randn({6}) * 0.1;
  ConvOptions o;
  o.stride = {2, 1};
  o.padding = {1, 2};
  o.dilation = {2, 2};
  o.groups = 2;
  auto m = QuantConv::Create(ConvKind::kConv2d, "model.conv", w, b, o, plan);
  ASSERT_TRUE(m.ok()) << m.status();
  const at::Tensor x = at::randn({2, 4, 9, 9});
  auto y = (*m)->Forward(x);
  ASSERT_TRUE(y.ok()) << y.status();
  const at::Tensor xq = *quant::FakeQuantizeDynamic(x, *plan.input);
  const at::Tensor wq =
      *quant::FakeQuantize(w, *plan.weight, *quant::ComputeQParams(w, *plan.weight));
  const at::Tensor ref = at::conv2d(xq.to(at::kDouble), wq.to(at::kDouble), b.to(at::kDouble),
                                    {2, 1}, {1, 2}, {2, 2}, 2);
  ASSERT_EQ(y->sizes(), ref.sizes());
  // 18 products per output in float32: relative 1e-5 of the largest output.
  EXPECT_LT(MaxAbs(y->to(at::kDouble) - ref), 1e-5 * MaxAbs(ref));
  EXPECT_GT(MaxAbs(*y - at::conv2d(x, w, b, {2, 1}, {1, 2}, {2, 2}, 2)), 1e-4);
}

TEST(QuantEmbeddingBagTest, BadInputsAndPlansAreRefused) {
  pipeline::LayerPlan plan;
  plan.weight = Int(DataType::kInt8, QScheme::kPerChannel);
  auto m = QuantEmbeddingBag::Create("model.bag", at::randn({50, 16}), BagMode::kSum, plan);
  ASSERT_TRUE(m.ok());
  auto out_of_range = (*m)->Forward(MakeBags({1, 50}, {0}));
  EXPECT_EQ(out_of_range.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(out_of_range.status().message().find("index 50"), std::string::npos);
  EXPECT_EQ((*m)->Forward(MakeBags({1, 2}, {1})).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ((*m)->Forward({at::tensor({1.0f}), at::tensor({0}, at::kLong)}).status().code(),
            StatusCode::kInvalidArgument);
  pipeline::LayerPlan with_input = plan;
  with_input.input = Int(DataType::kInt8, QScheme::kPerTensor);
  auto refused =
      QuantEmbeddingBag::Create("model.bag", at::randn({50, 16}), BagMode::kSum, with_input);
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("input_tensors"), std::string::npos);
}

}  // namespace
}  // namespace quantd::quant_modules
