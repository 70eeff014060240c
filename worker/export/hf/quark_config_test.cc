#include "worker/export/hf/quark_config.h"

#include "gtest/gtest.h"

namespace quantd::exporter {
namespace {

using nlohmann::json;
using quant::DataType;
using quant::QScheme;
using quant::QuantSpec;

QuantSpec Spec(DataType t, QScheme q, std::optional<int> group = std::nullopt, bool sym = true) {
  QuantSpec s;
  s.dtype = t;
  s.qscheme = q;
  s.group_size = group;
  s.symmetric = sym;
  return s;
}

TEST(QuarkSpecJson, RoundTripsEveryFamily) {
  std::vector<QuantSpec> specs = {
      Spec(DataType::kInt4, QScheme::kPerGroup, 128),
      Spec(DataType::kUInt4, QScheme::kPerGroup, 32, /*sym=*/false),
      Spec(DataType::kInt8, QScheme::kPerChannel),
      Spec(DataType::kFp8E4M3, QScheme::kPerTensor),
      Spec(DataType::kMxFp4, QScheme::kPerGroup, 32),
      Spec(DataType::kMxFp6E2M3, QScheme::kPerGroup, 32),
  };
  specs[2].ch_axis = 0;
  specs[3].is_dynamic = true;
  specs[4].mx_scale_mode = quant::MxScaleMode::kFloor;
  specs[1].scale_type = quant::ScaleType::kFloat16;
  specs[1].round_method = quant::RoundMethod::kRound;
  for (const QuantSpec& s : specs) {
    const json j = QuarkSpecJson(s);
    auto back = ParseQuarkSpec(j, "weight");
    ASSERT_TRUE(back.ok()) << back.status() << " " << j.dump();
    ASSERT_TRUE(back->has_value());
    QuantSpec want = s;
    if (quant::IsMxType(s.dtype)) want.ch_axis = -1;
    if (s.qscheme == QScheme::kPerGroup && !want.ch_axis) want.ch_axis = -1;
    EXPECT_EQ(quant::DescribeSpec(**back), quant::DescribeSpec(want)) << j.dump();
    EXPECT_EQ((*back)->scale_type, s.scale_type);
    EXPECT_EQ((*back)->round_method, s.round_method);
    EXPECT_EQ((*back)->is_dynamic, s.is_dynamic);
    EXPECT_EQ((*back)->mx_scale_mode, s.mx_scale_mode);
  }
}

TEST(QuarkSpecJson, MxIsSpelledAsTheReferenceWritesIt) {
  const json j = QuarkSpecJson(Spec(DataType::kMxFp4, QScheme::kPerGroup, 32));
  EXPECT_EQ(j["dtype"], "fp4");
  EXPECT_EQ(j["qscheme"], "per_group");
  EXPECT_EQ(j["group_size"], 32);
  EXPECT_EQ(j["scale_format"], "e8m0");
  EXPECT_EQ(j["scale_calculation_mode"], "even");
  // The older spelling: dtype "mx" with mx_element_dtype.
  auto old = ParseQuarkSpec(json{{"dtype", "mx"}, {"mx_element_dtype", "fp6_e3m2"}}, "w");
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_EQ((*old)->dtype, DataType::kMxFp6E3M2);
  EXPECT_EQ((*old)->group_size, 32);
}

TEST(QuarkSpecJson, BadFieldsAreNamed) {
  auto bad = ParseQuarkSpec(json{{"dtype", "int5"}}, "global_quant_config.weight");
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  ASSERT_EQ(bad.status().violations().size(), 1u);
  EXPECT_EQ(bad.status().violations()[0].field, "global_quant_config.weight.dtype");
  auto mistyped = ParseQuarkSpec(json{{"dtype", "int8"}, {"group_size", "32"}}, "w");
  EXPECT_EQ(mistyped.status().violations()[0].field, "w.group_size");
  auto seq = ParseQuarkSpec(json::array({json{{"dtype", "int8"}}}), "w");
  EXPECT_EQ(seq.status().code(), StatusCode::kUnimplemented);
  auto null = ParseQuarkSpec(json(), "w");
  ASSERT_TRUE(null.ok());
  EXPECT_FALSE(null->has_value());
}

TEST(QuarkConfig, ResolvesLayerThenTypeThenGlobalMinusExcludes) {
  QuarkLayerSpecs global, kv, down;
  global.weight = Spec(DataType::kInt4, QScheme::kPerGroup, 32);
  kv = global;
  kv.output = Spec(DataType::kFp8E4M3, QScheme::kPerTensor);
  down.weight = Spec(DataType::kInt8, QScheme::kPerChannel);
  const json cfg = {{"quant_method", "quark"},
                    {"global_quant_config", QuarkLayerJson(global)},
                    {"layer_type_quant_config", {{"Linear", QuarkLayerJson(down)}}},
                    {"layer_quant_config", {{"*k_proj", QuarkLayerJson(kv)}}},
                    {"exclude", {"lm_head", "model.layers.1"}},
                    {"export",
                     {{"weight_format", "real_quantized"},
                      {"pack_method", "reorder"},
                      {"kv_cache_group", {"*k_proj", "*v_proj"}},
                      {"min_kv_scale", 0.25}}}};
  auto c = QuarkConfig::Parse(cfg.dump());
  ASSERT_TRUE(c.ok()) << c.status();
  QuarkLayerSpecs k = c->Resolve("model.layers.0.self_attn.k_proj", "Linear");
  ASSERT_TRUE(k.output);
  EXPECT_EQ(k.output->dtype, DataType::kFp8E4M3);
  QuarkLayerSpecs q = c->Resolve("model.layers.0.self_attn.q_proj", "Linear");
  ASSERT_TRUE(q.weight);
  EXPECT_EQ(q.weight->dtype, DataType::kInt8);  // by type
  QuarkLayerSpecs other = c->Resolve("model.layers.0.conv", "Conv2d");
  ASSERT_TRUE(other.weight);
  EXPECT_EQ(other.weight->dtype, DataType::kInt4);  // global
  EXPECT_FALSE(c->Resolve("lm_head", "Linear").quantized());
  // "model.layers.1" also excludes everything under it, but not layers.10.
  EXPECT_FALSE(c->Resolve("model.layers.1.mlp.up_proj", "Linear").quantized());
  EXPECT_TRUE(c->Resolve("model.layers.10.mlp.up_proj", "Linear").quantized());
  EXPECT_EQ(c->export_section().kv_cache_group, (std::vector<std::string>{"*k_proj", "*v_proj"}));
  EXPECT_DOUBLE_EQ(c->export_section().min_kv_scale, 0.25);
}

TEST(QuarkConfig, GlobsFollowPythonFnmatch) {
  EXPECT_TRUE(QuarkGlobMatch("*down_proj", "model.layers.3.mlp.down_proj"));
  EXPECT_TRUE(QuarkGlobMatch("model.layers.[0-2].*", "model.layers.2.mlp/x"));
  EXPECT_FALSE(QuarkGlobMatch("*k_proj", "model.layers.0.self_attn.k_proj.weight"));
  EXPECT_FALSE(QuarkConfig::Parse("[1, 2]").ok());
}

TEST(QuarkConfig, DeeplyNestedConfigIsRefused) {
  auto c = QuarkConfig::Parse("{\"x\": " + std::string(300000, '[') +
                              std::string(300000, ']') + "}");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(c.status().message(), "quantization_config: nests 300001 levels deep; at most 64");
}

TEST(QuarkConfig, RegexExcludesMatchAsTheEngineWritesThem) {
  const json cfg = {{"quant_method", "quark"},
                    {"global_quant_config", QuarkLayerJson(QuarkLayerSpecs{
                                                Spec(DataType::kInt8, QScheme::kPerChannel)})},
                    {"exclude", {"re:.*mlp\\.(gate|up)_proj", "re:(?:[a-z0-9_.]|[a-z0-9_.])*!"}}};
  auto c = QuarkConfig::Parse(cfg.dump());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->Excluded("model.layers.0.mlp.up_proj"));
  EXPECT_FALSE(c->Excluded("model.layers.0.mlp.down_proj"));
  EXPECT_FALSE(c->Excluded(std::string(100000, 'a')));  // linear on RE2
}

}  // namespace
}  // namespace quantd::exporter
