#include "worker/pipeline/pipeline_quantized_model.h"

#include <cstdlib>
#include <filesystem>

#include "gtest/gtest.h"
#include "worker/io/tensor_map_source.h"
#include "worker/models/registry.h"
#include "worker/pipeline/scratch_store.h"
#include "worker/quant/fake_quant.h"

namespace quantd::pipeline {
namespace {

constexpr char kQProj[] = "model.layers.2.self_attn.q_proj";

quant::QuantSpec Uint4PerChannelAsym() {
  quant::QuantSpec s;
  s.dtype = quant::DataType::kUInt4;
  s.qscheme = quant::QScheme::kPerChannel;
  s.ch_axis = 0;
  s.symmetric = false;
  return s;
}

TEST(PipelineQuantizedModelTest, ServesScratchValuesPlansAndExactWeightParameters) {
  auto model = models::OpenCausalLM("models/stories260K", {});
  ASSERT_TRUE(model.ok()) << model.status();
  const std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/scratch";
  auto scratch = ScratchStore::Create(dir);
  ASSERT_TRUE(scratch.ok()) << scratch.status();

  // What the pipeline writes for one quantized weight: the fake-quantized
  // value and its parameters under the reserved names.
  const quant::QuantSpec spec = Uint4PerChannelAsym();
  auto w = (*model)->weights().Load(std::string(kQProj) + ".weight", at::kFloat);
  ASSERT_TRUE(w.ok());
  auto qp = quant::ComputeQParams(*w, spec);
  ASSERT_TRUE(qp.ok()) << qp.status();
  auto fq = quant::FakeQuantize(*w, spec, *qp);
  ASSERT_TRUE(fq.ok()) << fq.status();
  ASSERT_EQ(qp->zero_point.scalar_type(), at::kInt);
  ASSERT_TRUE(
      (*scratch)
          ->Put("block_00002", {{std::string(kQProj) + ".weight", *fq},
                                {WeightScaleKey(kQProj), qp->scale},
                                {WeightZeroPointKey(kQProj), qp->zero_point.to(at::kFloat)}})
          .ok());

  std::map<std::string, LayerPlan> plans;
  for (const auto& l : models::ListLinearLayers((*model)->config())) {
    LayerPlan p;
    if (l.name.rfind("model.layers.", 0) == 0) p.weight = spec;
    plans[l.name] = p;
  }
  std::shared_ptr<const io::TensorSource> values = std::make_shared<io::OverlaySource>(
      std::shared_ptr<const io::TensorSource>(scratch->get(), [](const io::TensorSource*) {}),
      (*model)->shared_weights());
  config::QuantConfig job_config;
  job_config.global_quant_config.weight = spec;
  job_config.exclude = {"lm_head"};
  PipelineQuantizedModel qm("models/stories260K", **model, values, plans, job_config);

  // 5 blocks x 7 linears, lm_head left in float, in model order.
  ASSERT_EQ(qm.layers().size(), 35u);
  EXPECT_EQ(qm.layers().front().name, "model.layers.0.self_attn.q_proj");
  EXPECT_EQ(qm.FindLayer("lm_head"), nullptr);
  ASSERT_NE(qm.FindLayer(kQProj), nullptr);
  EXPECT_EQ(qm.FindLayer(kQProj)->weight->dtype, quant::DataType::kUInt4);
  EXPECT_FALSE(qm.FindLayer(kQProj)->input.has_value());
  EXPECT_EQ(qm.quant_config(), job_config);
  EXPECT_EQ(qm.config().num_hidden_layers, 5);

  // Values: the scratch store's where the job wrote them, else the checkpoint's.
  auto loaded = qm.Load(std::string(kQProj) + ".weight");
  ASSERT_TRUE(loaded.ok());
  EXPECT_TRUE(at::equal(*loaded, *fq));
  EXPECT_FALSE(at::equal(*loaded, *w));
  auto k = qm.Load("model.layers.2.self_attn.k_proj.weight");
  auto k_orig = (*model)->weights().Load("model.layers.2.self_attn.k_proj.weight", at::kFloat);
  ASSERT_TRUE(k.ok() && k_orig.ok());
  EXPECT_TRUE(at::equal(*k, *k_orig));

  // Exact parameters back, integer zero point restored to int32.
  auto back = qm.WeightQParams(kQProj);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(at::equal(back->scale, qp->scale));
  ASSERT_EQ(back->zero_point.scalar_type(), at::kInt);
  EXPECT_TRUE(at::equal(back->zero_point, qp->zero_point));
  auto codes_refq = quant::FakeQuantize(*w, spec, *back);
  ASSERT_TRUE(codes_refq.ok());
  EXPECT_TRUE(at::equal(*codes_refq, *fq));

  EXPECT_EQ(qm.WeightQParams("lm_head").status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace quantd::pipeline
