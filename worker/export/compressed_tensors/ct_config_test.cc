#include "worker/export/compressed_tensors/ct_config.h"

#include "gtest/gtest.h"

namespace quantd::exporter {
namespace {

using nlohmann::json;
using quant::DataType;
using quant::QScheme;
using quant::QuantSpec;

QuantSpec Spec(DataType t, QScheme q, std::optional<int> group = {}, bool symmetric = true,
               bool dynamic = false, std::optional<int> axis = {}) {
  QuantSpec s;
  s.dtype = t;
  s.qscheme = q;
  s.group_size = group;
  s.symmetric = symmetric;
  s.is_dynamic = dynamic;
  s.ch_axis = axis;
  return s;
}

TEST(CtConfig, W4A16GroupTargetsLinearAndIgnoresTheRest) {
  CtConfigInput in;
  const QuantSpec w = Spec(DataType::kInt4, QScheme::kPerGroup, 32);
  in.quantized = {{"model.layers.0.self_attn.q_proj", w, {}},
                  {"model.layers.0.mlp.up_proj", w, {}}};
  in.unquantized = {"model.layers.0.mlp.down_proj", "lm_head"};
  auto c = BuildCtQuantizationConfig(in);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ((*c)["quant_method"], "compressed-tensors");
  EXPECT_EQ((*c)["quantization_status"], "compressed");
  EXPECT_EQ((*c)["format"], "pack-quantized");
  EXPECT_EQ((*c)["ignore"], json({"model.layers.0.mlp.down_proj", "lm_head"}));
  EXPECT_TRUE((*c)["kv_cache_scheme"].is_null());
  ASSERT_EQ((*c)["config_groups"].size(), 1u);
  const json& g = (*c)["config_groups"]["group_0"];
  EXPECT_EQ(g["targets"], json({"Linear"}));
  EXPECT_TRUE(g["input_activations"].is_null());
  EXPECT_EQ(g["weights"]["num_bits"], 4);
  EXPECT_EQ(g["weights"]["type"], "int");
  EXPECT_EQ(g["weights"]["strategy"], "group");
  EXPECT_EQ(g["weights"]["group_size"], 32);
  EXPECT_EQ(g["weights"]["symmetric"], true);
  EXPECT_EQ(g["weights"]["dynamic"], false);
}

TEST(CtConfig, FormatsFollowTheLibrarysPriority) {
  const QuantSpec int8_ch = Spec(DataType::kInt8, QScheme::kPerChannel, {}, true, false, 0);
  const QuantSpec int8_tok = Spec(DataType::kInt8, QScheme::kPerChannel, {}, true, true, 1);
  const QuantSpec fp8 = Spec(DataType::kFp8E4M3, QScheme::kPerTensor);
  EXPECT_EQ(CtFormatFor(int8_ch, int8_tok), "int-quantized");
  EXPECT_EQ(CtFormatFor(int8_ch, std::nullopt), "pack-quantized");
  EXPECT_EQ(CtFormatFor(fp8, fp8), "float-quantized");
  EXPECT_EQ(CtFormatFor(fp8, std::nullopt), "naive-quantized");
  EXPECT_EQ(CtQuantizationArgs(int8_tok)["strategy"], "token");
  EXPECT_EQ(CtQuantizationArgs(int8_tok)["dynamic"], true);
  EXPECT_EQ(CtQuantizationArgs(int8_ch)["strategy"], "channel");
  EXPECT_TRUE(CtQuantizationArgs(int8_ch)["group_size"].is_null());
  EXPECT_EQ(CtQuantizationArgs(fp8)["type"], "float");
  EXPECT_EQ(CtQuantizationArgs(fp8)["strategy"], "tensor");
  // group_size -1: one group per row, the library's channel strategy.
  EXPECT_EQ(CtQuantizationArgs(Spec(DataType::kInt4, QScheme::kPerGroup, -1))["strategy"],
            "channel");
}

TEST(CtConfig, TwoSchemesNameTheirModulesAndMixFormats) {
  CtConfigInput in;
  const QuantSpec w4 = Spec(DataType::kInt4, QScheme::kPerGroup, 32);
  const QuantSpec fp8 = Spec(DataType::kFp8E4M3, QScheme::kPerTensor);
  in.quantized = {{"a.q_proj", w4, {}}, {"a.o_proj", fp8, fp8}, {"a.k_proj", w4, {}}};
  in.kv_cache = fp8;
  auto c = BuildCtQuantizationConfig(in);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ((*c)["format"], "mixed-precision");
  EXPECT_EQ((*c)["config_groups"]["group_0"]["targets"], json({"a.q_proj", "a.k_proj"}));
  EXPECT_EQ((*c)["config_groups"]["group_0"]["format"], "pack-quantized");
  EXPECT_EQ((*c)["config_groups"]["group_1"]["targets"], json({"a.o_proj"}));
  EXPECT_EQ((*c)["config_groups"]["group_1"]["format"], "float-quantized");
  EXPECT_EQ((*c)["kv_cache_scheme"]["type"], "float");
  EXPECT_EQ((*c)["kv_cache_scheme"]["num_bits"], 8);
  EXPECT_EQ((*c)["kv_cache_scheme"]["strategy"], "tensor");
  EXPECT_EQ((*c)["kv_cache_scheme"]["symmetric"], true);
  EXPECT_EQ((*c)["kv_cache_scheme"]["dynamic"], false);
}

TEST(CtConfig, RefusesAFloatModel) {
  EXPECT_EQ(BuildCtQuantizationConfig({}).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace quantd::exporter
