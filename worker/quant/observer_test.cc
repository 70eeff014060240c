#include "worker/quant/observer.h"

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "worker/quant/fake_quant.h"
#include "worker/quant/mx.h"

namespace quantd::quant {
namespace {

QuantSpec Spec(DataType t, QScheme q, bool sym, ObserverType obs = ObserverType::kMinMax,
               std::optional<int> axis = {}, std::optional<int> group = {}) {
  QuantSpec s;
  s.dtype = t;
  s.qscheme = q;
  s.symmetric = sym;
  s.observer = obs;
  s.ch_axis = axis;
  s.group_size = group;
  return s;
}

std::unique_ptr<Observer> Make(const QuantSpec& spec, const ObserverOptions& opts = {}) {
  auto o = Observer::Create(spec, opts);
  EXPECT_TRUE(o.ok()) << o.status();
  return o.ok() ? std::move(*o) : nullptr;
}

QParams Params(const Observer& o) {
  auto qp = o.ComputeQParams();
  EXPECT_TRUE(qp.ok()) << qp.status();
  return qp.ok() ? *qp : QParams();
}

void ExpectSameParams(const QParams& a, const QParams& b, const std::string& what) {
  ASSERT_TRUE(a.scale.defined() && b.scale.defined()) << what;
  EXPECT_TRUE(at::equal(a.scale, b.scale)) << what << "\n" << a.scale << "\n" << b.scale;
  ASSERT_EQ(a.zero_point.defined(), b.zero_point.defined()) << what;
  if (a.zero_point.defined()) {
    EXPECT_TRUE(at::equal(a.zero_point, b.zero_point)) << what;
  }
}

std::vector<at::Tensor> Batches(int n, std::vector<int64_t> sizes, uint64_t seed) {
  at::manual_seed(seed);
  std::vector<at::Tensor> out;
  for (int i = 0; i < n; ++i) out.push_back(at::randn(sizes) * (1.0 + i) + 0.1 * i);
  return out;
}

TEST(ObserverTest, MinMaxAccumulatesLikeOneBigBatch) {
  const std::vector<at::Tensor> batches = Batches(3, {10, 64}, 1);
  const at::Tensor all = at::cat(batches, 0);
  for (const QuantSpec& spec :
       {Spec(DataType::kInt8, QScheme::kPerTensor, true),
        Spec(DataType::kUInt8, QScheme::kPerTensor, false),
        Spec(DataType::kInt4, QScheme::kPerChannel, false, ObserverType::kMinMax, -1),
        Spec(DataType::kFp8E4M3, QScheme::kPerTensor, true)}) {
    auto o = Make(spec);
    for (const at::Tensor& b : batches) ASSERT_TRUE(o->Observe(b).ok());
    EXPECT_EQ(o->num_batches(), 3);
    auto expected = ComputeQParams(all, spec);
    ASSERT_TRUE(expected.ok());
    ExpectSameParams(Params(*o), *expected, DescribeSpec(spec));
  }
  // Per-group weights seen twice: the element-wise range of both.
  const QuantSpec group =
      Spec(DataType::kInt4, QScheme::kPerGroup, true, ObserverType::kMinMax, -1, 16);
  auto o = Make(group);
  ASSERT_TRUE(o->Observe(batches[0]).ok());
  ASSERT_TRUE(o->Observe(batches[1]).ok());
  auto mm0 = MinMaxComposed(batches[0], group);
  auto mm1 = MinMaxComposed(batches[1], group);
  ASSERT_TRUE(mm0.ok() && mm1.ok());
  auto expected = QParamsFromMinMax(at::minimum(mm0->first, mm1->first),
                                    at::maximum(mm0->second, mm1->second), group, at::kFloat);
  ASSERT_TRUE(expected.ok());
  ExpectSameParams(Params(*o), *expected, "per group");
}

TEST(ObserverTest, OrderDoesNotMatterAndMergeIsExact) {
  const std::vector<at::Tensor> b = Batches(4, {50, 40}, 2);
  ObserverOptions opts;
  for (const QuantSpec& spec :
       {Spec(DataType::kInt8, QScheme::kPerChannel, true, ObserverType::kMinMax, -1),
        Spec(DataType::kInt8, QScheme::kPerTensor, true, ObserverType::kPercentile),
        Spec(DataType::kUInt8, QScheme::kPerTensor, false, ObserverType::kPercentile),
        Spec(DataType::kInt4, QScheme::kPerTensor, true, ObserverType::kMse),
        Spec(DataType::kFp8E4M3, QScheme::kPerTensor, true, ObserverType::kMse),
        Spec(DataType::kMxFp4, QScheme::kPerGroup, true)}) {
    QuantSpec s = spec;
    if (s.observer == ObserverType::kPercentile) s.percentile = 99.0;
    auto forward = Make(s);
    for (int i : {0, 1, 2, 3}) ASSERT_TRUE(forward->Observe(b[i]).ok());
    auto backward = Make(s);
    for (int i : {3, 2, 1, 0}) ASSERT_TRUE(backward->Observe(b[i]).ok());
    ExpectSameParams(Params(*forward), Params(*backward), DescribeSpec(s) + " order");
    // Two shards merged.
    auto shard_a = Make(s);
    auto shard_b = Make(s);
    ASSERT_TRUE(shard_a->Observe(b[2]).ok());
    ASSERT_TRUE(shard_a->Observe(b[0]).ok());
    ASSERT_TRUE(shard_b->Observe(b[3]).ok());
    ASSERT_TRUE(shard_b->Observe(b[1]).ok());
    ASSERT_TRUE(shard_a->Merge(*shard_b).ok());
    EXPECT_EQ(shard_a->num_batches(), 4);
    ExpectSameParams(Params(*shard_a), Params(*forward), DescribeSpec(s) + " merge");
  }
}

TEST(ObserverTest, PercentileClipsOutliers) {
  at::manual_seed(3);
  at::Tensor x = at::rand({100000}) * 2 - 1;  // uniform [-1, 1)
  x.slice(0, 0, 10).fill_(50.0f);             // 0.01% outliers
  QuantSpec spec = Spec(DataType::kInt8, QScheme::kPerTensor, true, ObserverType::kPercentile);
  spec.percentile = 99.9;
  auto o = Make(spec);
  ASSERT_TRUE(o->Observe(x).ok());
  const float scale = Params(*o).scale.item<float>();
  // Clip near 0.999 (bins of 64 / 2048 = 1/32 wide over [0, 64)).
  EXPECT_GT(scale * 127.5f, 0.99f);
  EXPECT_LT(scale * 127.5f, 1.0f + 1.0f / 32);
  // 100% is the min-max range.
  spec.percentile = 100.0;
  auto full = Make(spec);
  ASSERT_TRUE(full->Observe(x).ok());
  auto minmax = ComputeQParams(x, Spec(DataType::kInt8, QScheme::kPerTensor, true));
  ASSERT_TRUE(minmax.ok());
  ExpectSameParams(Params(*full), *minmax, "percentile 100");
  // The one-call entry point runs the same observer.
  spec.percentile = 99.9;
  auto direct = ComputeQParams(x, spec);
  ASSERT_TRUE(direct.ok());
  ExpectSameParams(*direct, Params(*o), "ComputeQParams with percentile");
}

TEST(ObserverTest, MseFindsAClipWithLessErrorThanMinMax) {
  at::manual_seed(4);
  const at::Tensor x = at::randn({200000});
  for (DataType t : {DataType::kInt4, DataType::kInt8, DataType::kFp8E4M3}) {
    const QuantSpec mse = Spec(t, QScheme::kPerTensor, true, ObserverType::kMse);
    const QuantSpec minmax = Spec(t, QScheme::kPerTensor, true);
    auto qp_mse = ComputeQParams(x, mse);
    auto qp_mm = ComputeQParams(x, minmax);
    ASSERT_TRUE(qp_mse.ok() && qp_mm.ok());
    auto y_mse = FakeQuantize(x, mse, *qp_mse);
    auto y_mm = FakeQuantize(x, minmax, *qp_mm);
    ASSERT_TRUE(y_mse.ok() && y_mm.ok());
    const double err_mse = (*y_mse - x).pow(2).mean().item<double>();
    const double err_mm = (*y_mm - x).pow(2).mean().item<double>();
    EXPECT_LE(err_mse, err_mm * 1.001) << DataTypeName(t);
    if (t == DataType::kInt4) {
      // The MSE-optimal 4-bit clip of a unit Gaussian is about 2.5 sigma, well
      // inside the ~4.5 sigma extreme of 200k samples.
      const float clip = qp_mse->scale.item<float>() * 7.5f;
      EXPECT_GT(clip, 2.0f);
      EXPECT_LT(clip, 3.0f);
      EXPECT_LT(err_mse, err_mm * 0.8);
    }
  }
}

TEST(ObserverTest, SamplingIsDeterministicWithASeed) {
  const std::vector<at::Tensor> b = Batches(2, {100000}, 5);
  const QuantSpec spec = Spec(DataType::kInt8, QScheme::kPerTensor, true, ObserverType::kMse);
  ObserverOptions opts;
  opts.max_samples_per_batch = 5000;
  opts.seed = 42;
  auto run = [&](const ObserverOptions& o) {
    auto obs = Make(spec, o);
    for (const at::Tensor& t : b) EXPECT_TRUE(obs->Observe(t).ok());
    return Params(*obs).scale.item<float>();
  };
  const float first = run(opts);
  EXPECT_EQ(run(opts), first);
  opts.seed = 43;
  const float other = run(opts);
  EXPECT_NEAR(other, first, first * 0.2);
}

TEST(ObserverTest, DynamicSpecsKeepTheLastBatch) {
  const std::vector<at::Tensor> b = Batches(2, {8, 32}, 6);
  QuantSpec spec = Spec(DataType::kInt8, QScheme::kPerChannel, true, ObserverType::kMinMax, 0);
  spec.is_dynamic = true;
  auto o = Make(spec);
  ASSERT_TRUE(o->Observe(b[0]).ok());
  ASSERT_TRUE(o->Observe(b[1]).ok());
  auto last = ComputeQParams(b[1], spec);
  ASSERT_TRUE(last.ok());
  ExpectSameParams(Params(*o), *last, "dynamic");
}

TEST(ObserverTest, MxObserverTracksBlockAmax) {
  const std::vector<at::Tensor> b = Batches(3, {4, 70}, 7);
  const QuantSpec spec = Spec(DataType::kMxFp8E4M3, QScheme::kPerGroup, true);
  auto o = Make(spec);
  for (const at::Tensor& t : b) ASSERT_TRUE(o->Observe(t.to(at::kBFloat16)).ok());
  at::Tensor amax;
  for (const at::Tensor& t : b) {
    auto a = mx::BlockAmaxComposed(t.to(at::kBFloat16), spec);
    ASSERT_TRUE(a.ok());
    amax = amax.defined() ? at::maximum(amax, *a) : *a;
  }
  const QParams qp = Params(*o);
  EXPECT_EQ(qp.scale.sizes(), (at::IntArrayRef{4, 3}));
  EXPECT_TRUE(at::equal(qp.scale, mx::ScaleFromAmaxComposed(amax, spec)));
  // The calibrated scales apply to a new batch.
  auto y = FakeQuantize(b[0], spec, qp);
  ASSERT_TRUE(y.ok());
  EXPECT_LT((*y - b[0]).abs().max().item<float>(), b[0].abs().max().item<float>() * 0.07);
}

TEST(ObserverTest, Errors) {
  auto per_channel_percentile = Observer::Create(
      Spec(DataType::kInt8, QScheme::kPerChannel, true, ObserverType::kPercentile));
  ASSERT_FALSE(per_channel_percentile.ok());
  EXPECT_EQ(per_channel_percentile.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(per_channel_percentile.status().violations().at(0).field, "spec.observer");

  ObserverOptions odd_bins;
  odd_bins.num_bins = 1000;
  EXPECT_FALSE(Observer::Create(
                   Spec(DataType::kInt8, QScheme::kPerTensor, true, ObserverType::kMse), odd_bins)
                   .ok());

  auto o = Make(Spec(DataType::kInt8, QScheme::kPerChannel, true, ObserverType::kMinMax, -1));
  EXPECT_EQ(o->ComputeQParams().status().code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(o->Observe(at::ones({4, 8})).ok());
  EXPECT_EQ(o->Observe(at::ones({4, 9})).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(o->Observe(at::ones({4, 8}, at::kInt)).code(), StatusCode::kInvalidArgument);
  auto other = Make(Spec(DataType::kInt4, QScheme::kPerChannel, true, ObserverType::kMinMax, -1));
  EXPECT_EQ(o->Merge(*other).code(), StatusCode::kInvalidArgument);
  o->Reset();
  EXPECT_EQ(o->num_batches(), 0);
  EXPECT_FALSE(o->ComputeQParams().ok());
}

}  // namespace
}  // namespace quantd::quant
