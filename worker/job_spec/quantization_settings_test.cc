#include "worker/job_spec/quantization_settings.h"

#include <string>
#include <vector>

#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "worker/config/quark_json.h"

namespace quantd::job_spec {
namespace {

using quant::DataType;
using quant::QScheme;

quantd::v1::QuantizationSettings Settings(const std::string& text) {
  quantd::v1::QuantizationSettings s;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &s)) << text;
  return s;
}

ResolvedQuantization Resolve(const std::string& text) {
  auto r = ResolveQuantization(Settings(text));
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? std::move(*r) : ResolvedQuantization();
}

TEST(QuantizationSettingsTest, PresetPlansLinearsAndLeavesLmHeadAndExcludesInFloat) {
  ResolvedQuantization r =
      Resolve(R"pb(scheme: "w_uint4_per_group_asym" group_size: 32 exclude: "model.layers.1")pb");
  pipeline::LayerPlan p = r.planner("model.layers.0.mlp.down_proj", "Linear");
  ASSERT_TRUE(p.weight.has_value());
  EXPECT_EQ(p.weight->dtype, DataType::kUInt4);
  EXPECT_EQ(p.weight->group_size, 32);
  EXPECT_FALSE(p.weight->symmetric);
  EXPECT_FALSE(p.input.has_value());
  EXPECT_FALSE(r.planner("model.layers.1.mlp.down_proj", "Linear").quantized());
  EXPECT_FALSE(r.planner("lm_head", "Linear").quantized());
  EXPECT_FALSE(r.planner("model.embed_tokens", "Embedding").quantized());
  EXPECT_FALSE(r.kv_cache.has_value());
  EXPECT_EQ(r.description, "w_uint4_per_group_asym (group 32)");
  const nlohmann::json j = config::QuarkJsonForExport(r.config, "fake_quantized");
  EXPECT_EQ(j.at("quant_method"), "quark");
  EXPECT_EQ(j.at("global_quant_config").at("weight").at("dtype"), "uint4");
  EXPECT_EQ(j.at("global_quant_config").at("weight").at("group_size"), 32);
  EXPECT_EQ(j.at("exclude"), nlohmann::json({"lm_head", "model.layers.1"}));
  EXPECT_EQ(j.at("export").at("weight_format"), "fake_quantized");
}

TEST(QuantizationSettingsTest, ActivationAndKvPresetsPlanEveryTensor) {
  ResolvedQuantization r = Resolve(R"pb(scheme: "w_fp8_a_fp8" fp8_kv_cache: true)pb");
  pipeline::LayerPlan k = r.planner("model.layers.0.self_attn.k_proj", "Linear");
  EXPECT_EQ(k.weight->dtype, DataType::kFp8E4M3);
  EXPECT_EQ(k.input->dtype, DataType::kFp8E4M3);
  ASSERT_TRUE(k.output.has_value());
  EXPECT_FALSE(k.output->is_dynamic);
  EXPECT_FALSE(r.planner("model.layers.0.self_attn.q_proj", "Linear").output.has_value());
  ASSERT_TRUE(r.kv_cache.has_value());
  EXPECT_EQ(r.kv_cache->dtype, DataType::kFp8E4M3);
  EXPECT_EQ(r.kv_cache->qscheme, QScheme::kPerTensor);
}

TEST(QuantizationSettingsTest, ReferenceJsonWithLayerGlobsAndKvCache) {
  quantd::v1::QuantizationSettings s;
  s.set_quark_json(R"({
    "quant_method": "quark",
    "global_quant_config": {"weight": {"dtype": "int8", "qscheme": "per_channel", "ch_axis": 0,
                                       "symmetric": true, "is_dynamic": false}},
    "layer_type_quant_config": {},
    "layer_quant_config": {"*down_proj": {"weight": {"dtype": "fp4", "qscheme": "per_group",
        "group_size": 32, "ch_axis": -1, "scale_format": "e8m0", "is_dynamic": false}}},
    "kv_cache_quant_config": {
      "*k_proj": {"output_tensors": {"dtype": "fp8_e4m3", "qscheme": "per_tensor",
                                      "is_dynamic": false}},
      "*v_proj": {"output_tensors": {"dtype": "fp8_e4m3", "qscheme": "per_tensor",
                                      "is_dynamic": false}}},
    "exclude": ["lm_head"],
    "export": {"kv_cache_group": ["*k_proj", "*v_proj"], "min_kv_scale": 0.001,
               "weight_format": "real_quantized"}
  })");
  auto r = ResolveQuantization(s);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->planner("model.layers.3.mlp.down_proj", "Linear").weight->dtype, DataType::kMxFp4);
  pipeline::LayerPlan v = r->planner("model.layers.3.self_attn.v_proj", "Linear");
  EXPECT_EQ(v.weight->dtype, DataType::kInt8);
  EXPECT_EQ(v.output->dtype, DataType::kFp8E4M3);
  ASSERT_TRUE(r->kv_cache.has_value());
  EXPECT_FLOAT_EQ(r->min_kv_scale, 0.001f);
  const nlohmann::json j = config::QuarkJsonForExport(r->config, "fake_quantized");
  EXPECT_EQ(j.at("export").at("weight_format"), "fake_quantized");
  EXPECT_EQ(j.at("export").at("kv_cache_group"), nlohmann::json({"*k_proj", "*v_proj"}));
  EXPECT_EQ(j.at("layer_quant_config").at("*down_proj").at("weight").at("dtype"), "fp4");
}

TEST(QuantizationSettingsTest, InvalidSettingsListEveryViolation) {
  auto r = ResolveQuantization(Settings(R"pb(scheme: "w_int4_per_grup_sym" exclude: "")pb"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  ASSERT_EQ(r.status().violations().size(), 2u);
  EXPECT_EQ(r.status().violations()[0].field, "spec.quantization.scheme");
  EXPECT_EQ(r.status().violations()[1].field, "spec.quantization.exclude[0]");
}

}  // namespace
}  // namespace quantd::job_spec
