// GPTQ through the pipeline on stories260K: its effect on perplexity against
// round-to-nearest, the true-sequential order inside a block, and the
// round-to-nearest fallback reported through the observer.
#include <ATen/ATen.h>

#include <cstdio>
#include <memory>
#include <tuple>

#include "gtest/gtest.h"
#include "worker/algo/block_hooks.h"
#include "worker/algo/gptq.h"
#include "worker/algo/testing/stories_job.h"
#include "worker/models/registry.h"
#include "worker/quant/fake_quant.h"

namespace quantd::algo {
namespace {

using testing::BlockLinears;
using testing::IncreaseRatio;
using testing::IntWeight;
using testing::RunStoriesJob;
using testing::StoriesJobOptions;
using testing::StoriesJobResult;

StoriesJobResult RunJob(const pipeline::LayerPlanner& planner,
                        std::shared_ptr<pipeline::BlockAlgorithm> algo) {
  StoriesJobOptions o;
  o.planner = planner;
  if (algo) o.algorithms.push_back(algo);
  auto r = RunStoriesJob(o);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : StoriesJobResult();
}

void Print(const char* what, const StoriesJobResult& rtn, const StoriesJobResult& algo) {
  std::printf("%-28s float %.4f  rtn %.4f  gptq %.4f  increase ratio %.3f\n", what, rtn.float_ppl,
              rtn.quant_ppl, algo.quant_ppl, IncreaseRatio(rtn, algo));
}

std::shared_ptr<GptqAlgorithm> Gptq(bool act_order = false, bool static_groups = false) {
  GptqOptions o;
  o.act_order = act_order;
  o.static_groups = static_groups;
  return std::make_shared<GptqAlgorithm>(o);
}

TEST(GptqJobTest, W3PerChannelHalvesTheRoundToNearestIncrease) {
  auto planner = BlockLinears(IntWeight(quant::DataType::kInt3, false));
  StoriesJobResult rtn = RunJob(planner, nullptr);
  StoriesJobResult gptq = RunJob(planner, Gptq());
  StoriesJobResult act = RunJob(planner, Gptq(/*act_order=*/true));
  Print("W3 per-channel asym", rtn, gptq);
  Print("W3 per-channel act_order", rtn, act);
  EXPECT_GT(rtn.quant_ppl, rtn.float_ppl);
  EXPECT_LE(IncreaseRatio(rtn, gptq), 0.5);
  EXPECT_LE(IncreaseRatio(rtn, act), 0.5);
  // The pipeline reports GPTQ's layers with the spec it used, and the time
  // GPTQ took within each block's.
  for (const auto& b : gptq.report.blocks) {
    for (const auto& l : b.layers) EXPECT_EQ(l.weight_format, "int3 per_channel(axis 0) asym");
    EXPECT_GT(b.algorithm_seconds, 0) << b.block;
    EXPECT_LT(b.algorithm_seconds, b.seconds) << b.block;
  }
  for (const auto& b : rtn.report.blocks) EXPECT_EQ(b.algorithm_seconds, 0) << b.block;
}

TEST(GptqJobTest, W4PerChannelAtMostPoint85OfRoundToNearest) {
  auto planner = BlockLinears(IntWeight(quant::DataType::kInt4, false));
  StoriesJobResult rtn = RunJob(planner, nullptr);
  StoriesJobResult gptq = RunJob(planner, Gptq());
  StoriesJobResult act = RunJob(planner, Gptq(/*act_order=*/true));
  Print("W4 per-channel asym", rtn, gptq);
  Print("W4 per-channel act_order", rtn, act);
  EXPECT_LE(IncreaseRatio(rtn, gptq), 0.85);
  EXPECT_LE(IncreaseRatio(rtn, act), 0.85);
}

TEST(GptqJobTest, W4Group32OnTheLayersItDivides) {
  // down_proj's 172 inputs are not a multiple of 32: it stays float.
  auto planner = BlockLinears(IntWeight(quant::DataType::kInt4, false, 32), std::nullopt,
                              [](const std::string& n) { return n.find("down_proj") == n.npos; });
  StoriesJobResult rtn = RunJob(planner, nullptr);
  StoriesJobResult gptq = RunJob(planner, Gptq());
  StoriesJobResult stat = RunJob(planner, Gptq(/*act_order=*/false, /*static_groups=*/true));
  StoriesJobResult both = RunJob(planner, Gptq(/*act_order=*/true, /*static_groups=*/true));
  Print("W4 g32 asym", rtn, gptq);
  Print("W4 g32 static_groups", rtn, stat);
  Print("W4 g32 act_order+static", rtn, both);
  EXPECT_LE(IncreaseRatio(rtn, gptq), 0.85);
  EXPECT_LE(IncreaseRatio(rtn, stat), 0.85);
  EXPECT_LE(IncreaseRatio(rtn, both), 0.85);
}

// Calibration passes with bfloat16 products (CalibrationOptions::
// compute_dtype) stay within the float32 passes' bars; evaluation is float32
// in both, so the perplexities compare directly.
TEST(GptqJobTest, Bfloat16CalibrationStaysWithinTheBars) {
  for (const auto& [label, dtype, bar] :
       {std::tuple{"W3 per-channel", quant::DataType::kInt3, 0.5},
        std::tuple{"W4 per-channel", quant::DataType::kInt4, 0.85}}) {
    auto planner = BlockLinears(IntWeight(dtype, false));
    StoriesJobResult rtn = RunJob(planner, nullptr);
    StoriesJobResult f32 = RunJob(planner, Gptq());
    StoriesJobOptions o;
    o.planner = planner;
    o.algorithms.push_back(Gptq());
    pipeline::CalibrationOptions cal;
    cal.num_samples = o.num_samples;
    cal.seq_len = o.seq_len;
    cal.seed = o.seed;
    cal.compute_dtype = at::kBFloat16;
    o.calibration = cal;
    auto bf16 = RunStoriesJob(o);
    ASSERT_TRUE(bf16.ok()) << bf16.status();
    std::printf("%-16s float %.4f  rtn %.4f  gptq f32 calib %.4f (ratio %.3f)  bf16 calib %.4f "
                "(ratio %.3f)\n",
                label, rtn.float_ppl, rtn.quant_ppl, f32.quant_ppl, IncreaseRatio(rtn, f32),
                bf16->quant_ppl, IncreaseRatio(rtn, *bf16));
    EXPECT_EQ(bf16->float_ppl, f32.float_ppl) << label;
    EXPECT_LE(IncreaseRatio(rtn, *bf16), bar) << label;
    // The products did change: bfloat16 passes are not the float32 ones.
    EXPECT_NE(bf16->quant_ppl, f32.quant_ppl) << label;
  }
}

// ---- directly on one block ----

class NullObserver : public pipeline::JobObserver {
 public:
  void OnLog(pipeline::LogLevel level, const std::string& m) override {
    if (level == pipeline::LogLevel::kWarning) warnings.push_back(m);
  }
  std::vector<std::string> warnings;
};

struct BlockFixture {
  std::unique_ptr<models::CausalLM> model;
  std::unique_ptr<models::DecoderBlock> block;
};

BlockFixture LoadBlock0() {
  BlockFixture f;
  auto m = models::OpenCausalLM(testing::kStoriesDir);
  EXPECT_TRUE(m.ok()) << m.status();
  f.model = std::move(*m);
  auto b = f.model->LoadBlock(0);
  EXPECT_TRUE(b.ok()) << b.status();
  f.block = std::move(*b);
  return f;
}

TEST(GptqBlockTest, TrueSequentialOrderWithinTheBlock) {
  const quant::QuantSpec spec = IntWeight(quant::DataType::kInt4, false);
  pipeline::LayerPlanner planner = BlockLinears(spec);
  at::manual_seed(2);
  at::Tensor inputs = at::randn({4, 32, 64});

  BlockFixture f = LoadBlock0();
  NullObserver obs;
  pipeline::BlockAlgorithmContext ctx{*f.model, *f.block, inputs, planner, obs, {}, {}};
  GptqAlgorithm algo;
  ASSERT_TRUE(algo.Apply(ctx).ok());
  ASSERT_EQ(ctx.quantized_weights.size(), 7u);
  EXPECT_TRUE(obs.warnings.empty());

  // By hand: each group's Hessian from a forward in which the groups before
  // it are already quantized.
  BlockFixture g = LoadBlock0();
  for (const auto& group : g.block->groups()) {
    models::Linear* first = g.block->FindLinear(group.linears[0]);
    HessianAccumulator acc(first->in_features());
    {
      ScopedHooks hooks;
      hooks.ObserveInput(*first, [&acc](const at::Tensor& t) { EXPECT_TRUE(acc.Add(t).ok()); });
      ASSERT_TRUE(g.block->Forward(inputs).ok());
    }
    for (const auto& name : group.linears) {
      models::Linear* l = g.block->FindLinear(name);
      auto r = GptqQuantizeWeight(l->weight(), acc.hessian(), spec);
      ASSERT_TRUE(r.ok());
      l->weight() = r->weight;
      EXPECT_TRUE(at::equal(r->weight, f.block->FindLinear(name)->weight())) << name;
      EXPECT_TRUE(at::equal(r->qparams.scale, ctx.quantized_weights.at(name).scale)) << name;
    }
  }
}

TEST(GptqBlockTest, AllConstantInputsFallBackToRoundToNearestAndAreReported) {
  const quant::QuantSpec spec = IntWeight(quant::DataType::kInt4, false);
  pipeline::LayerPlanner planner = BlockLinears(spec);
  // Every token of every sample is the same vector, so every layer's Hessian
  // has rank one; without damping none of them factorises.
  at::Tensor inputs = at::full({2, 16, 64}, 0.5);
  BlockFixture f = LoadBlock0();
  std::map<std::string, at::Tensor> original;
  for (models::Linear* l : f.block->linears()) original[l->name()] = l->weight().clone();
  NullObserver obs;
  pipeline::BlockAlgorithmContext ctx{*f.model, *f.block, inputs, planner, obs, {}, {}};
  GptqOptions opt;
  opt.damp_percent = 0;
  opt.max_damp_retries = 0;
  GptqAlgorithm algo(opt);
  ASSERT_TRUE(algo.Apply(ctx).ok());
  ASSERT_EQ(obs.warnings.size(), 7u);
  EXPECT_NE(obs.warnings[0].find("GPTQ fell back to round-to-nearest for "
                                 "model.layers.0.self_attn.q_proj"),
            std::string::npos)
      << obs.warnings[0];
  for (models::Linear* l : f.block->linears()) {
    const at::Tensor& w = original[l->name()];
    auto qp = quant::ComputeQParams(w, spec);
    EXPECT_TRUE(at::equal(l->weight(), *quant::FakeQuantize(w, spec, *qp))) << l->name();
    EXPECT_TRUE(at::equal(ctx.float_weights.at(l->name()), w));
  }
}

TEST(GptqBlockTest, CancelStopsBeforeTheNextGroup) {
  class Cancelling : public pipeline::JobObserver {
   public:
    bool CancelRequested() const override { return true; }
  } obs;
  pipeline::LayerPlanner planner = BlockLinears(IntWeight(quant::DataType::kInt4, false));
  at::Tensor inputs = at::randn({1, 8, 64});
  BlockFixture f = LoadBlock0();
  pipeline::BlockAlgorithmContext ctx{*f.model, *f.block, inputs, planner, obs, {}, {}};
  EXPECT_EQ(GptqAlgorithm().Apply(ctx).code(), StatusCode::kCancelled);
  EXPECT_TRUE(ctx.quantized_weights.empty());
}

}  // namespace
}  // namespace quantd::algo
