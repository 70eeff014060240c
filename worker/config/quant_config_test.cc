#include "worker/config/quant_config.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "worker/config/presets.h"

namespace quantd::config {
namespace {

using quant::DataType;
using quant::QScheme;

QuantSpec IntSpec(DataType t, QScheme q = QScheme::kPerTensor, std::optional<int> group = {}) {
  QuantSpec s;
  s.dtype = t;
  s.qscheme = q;
  s.group_size = group;
  if (q != QScheme::kPerTensor) s.ch_axis = q == QScheme::kPerGroup ? 1 : 0;
  return s;
}

LayerQuantConfig WeightOnly(QuantSpec w) {
  LayerQuantConfig c;
  c.weight = w;
  return c;
}

std::vector<std::string> Fields(const Status& s) {
  std::vector<std::string> out;
  for (const FieldViolation& v : s.violations()) out.push_back(v.field);
  return out;
}

TEST(GlobTest, FnmatchSemanticsAndExcludeExpansion) {
  EXPECT_TRUE(GlobMatch("*.q_proj", "model.layers.0.self_attn.q_proj"));
  EXPECT_TRUE(GlobMatch("*q_proj", "model.layers.0.self_attn.q_proj"));
  EXPECT_FALSE(GlobMatch("*.q_proj", "model.layers.0.self_attn.q_proj_lora"));
  EXPECT_TRUE(GlobMatch("model.layers.[0-3].*", "model.layers.2.mlp.up_proj"));
  EXPECT_FALSE(GlobMatch("model.layers.[!0-3].*", "model.layers.2.mlp.up_proj"));
  EXPECT_TRUE(GlobMatch("model.layers.?.mlp.*", "model.layers.7.mlp.down_proj"));
  EXPECT_FALSE(GlobMatch("Model.*", "model.layers.0"));  // case-sensitive
  // exclude: `p` also matches `p.*`.
  EXPECT_TRUE(ExcludeMatch("lm_head", "lm_head"));
  EXPECT_TRUE(ExcludeMatch("model.layers.0", "model.layers.0.mlp.up_proj"));
  EXPECT_FALSE(ExcludeMatch("model.layers.0", "model.layers.01.mlp.up_proj"));
  EXPECT_FALSE(GlobMatch("model.layers.0", "model.layers.0.mlp.up_proj"));
  EXPECT_TRUE(ExcludeMatch("*.mlp.gate", "model.layers.3.mlp.gate.experts.0"));
  // "re:" entries: a regular expression matched from the start of the name.
  EXPECT_TRUE(ExcludeMatch("re:.*self_attn.*", "model.layers.0.self_attn.q_proj"));
  EXPECT_TRUE(ExcludeMatch(R"(re:.*mlp\.(gate|up)_proj)", "model.layers.2.mlp.up_proj"));
  EXPECT_FALSE(ExcludeMatch(R"(re:.*mlp\.(gate|up)_proj)", "model.layers.2.mlp.down_proj"));
  EXPECT_TRUE(ExcludeMatch("re:lm_head", "lm_head"));
  EXPECT_FALSE(ExcludeMatch("re:head", "lm_head"));  // anchored at the start
  EXPECT_FALSE(ExcludeMatch("re:(", "model.layers.0"));
}

TEST(ResolveTest, LayerGlobBeatsTypeBeatsGlobalAndFirstGlobWins) {
  QuantConfig c;
  c.global_quant_config = WeightOnly(IntSpec(DataType::kInt8));
  c.layer_type_quant_config.push_back({"Conv2d", WeightOnly(IntSpec(DataType::kUInt8))});
  c.layer_quant_config.push_back(
      {"*down_proj", WeightOnly(IntSpec(DataType::kInt4, QScheme::kPerGroup, 32))});
  c.layer_quant_config.push_back({"*.mlp.*", WeightOnly(IntSpec(DataType::kInt3))});
  c.exclude = {"model.layers.1"};

  ResolvedLayer r = ResolveLayer(c, "model.layers.0.mlp.down_proj", "Linear");
  EXPECT_TRUE(r.quantized);
  EXPECT_EQ(r.config.weight->dtype, DataType::kInt4);
  EXPECT_EQ(r.origin, ResolvedLayer::Origin::kLayerName);
  EXPECT_EQ(r.origin_index, 0);
  EXPECT_EQ(r.source, "layer_quant_config[*down_proj]");

  r = ResolveLayer(c, "model.layers.0.mlp.up_proj", "Linear");
  EXPECT_EQ(r.config.weight->dtype, DataType::kInt3);  // the second glob

  r = ResolveLayer(c, "model.conv_in", "Conv2d");
  EXPECT_EQ(r.config.weight->dtype, DataType::kUInt8);
  EXPECT_EQ(r.origin, ResolvedLayer::Origin::kLayerType);

  r = ResolveLayer(c, "model.layers.0.self_attn.q_proj", "Linear");
  EXPECT_EQ(r.config.weight->dtype, DataType::kInt8);
  EXPECT_EQ(r.origin, ResolvedLayer::Origin::kGlobal);

  // Exclude wins over a matching layer glob.
  r = ResolveLayer(c, "model.layers.1.mlp.down_proj", "Linear");
  EXPECT_FALSE(r.quantized);
  EXPECT_EQ(r.origin, ResolvedLayer::Origin::kExcluded);
  EXPECT_EQ(r.source, "exclude[model.layers.1]");

  // Module types the config does not quantize.
  r = ResolveLayer(c, "model.norm", "RMSNorm");
  EXPECT_FALSE(r.quantized);
}

TEST(ResolveTest, EmbeddingsAndLmHeadNeedAnExplicitConfig) {
  QuantConfig c;
  c.global_quant_config = WeightOnly(IntSpec(DataType::kInt8));
  EXPECT_FALSE(ResolveLayer(c, "model.embed_tokens", "Embedding").quantized);
  EXPECT_FALSE(ResolveLayer(c, "lm_head", "Linear").quantized);
  EXPECT_FALSE(ResolveLayer(c, "model.lm_head", "Linear").quantized);
  EXPECT_NE(ResolveLayer(c, "lm_head", "Linear").source.find("lm_head"), std::string::npos);

  c.layer_type_quant_config.push_back({"Embedding", WeightOnly(IntSpec(DataType::kUInt8))});
  EXPECT_EQ(ResolveLayer(c, "model.embed_tokens", "Embedding").config.weight->dtype,
            DataType::kUInt8);
  // A type config does not name lm_head; a layer glob does.
  c.layer_type_quant_config.push_back({"Linear", WeightOnly(IntSpec(DataType::kInt4))});
  EXPECT_FALSE(ResolveLayer(c, "lm_head", "Linear").quantized);
  c.layer_quant_config.push_back({"lm_head", WeightOnly(IntSpec(DataType::kInt8))});
  EXPECT_TRUE(ResolveLayer(c, "lm_head", "Linear").quantized);
}

TEST(ResolveTest, KvCacheSpecGoesOnTheOutputsOfKAndVProjections) {
  auto preset = PresetConfig("w_fp8_a_fp8");
  ASSERT_TRUE(preset.ok());
  QuantConfig c = *preset;
  AddFp8KvCache(c);
  ASSERT_EQ(c.kv_cache_quant_config.size(), 2u);
  ResolvedLayer k = ResolveLayer(c, "model.layers.0.self_attn.k_proj", "Linear");
  ASSERT_TRUE(k.config.output_tensors.has_value());
  EXPECT_EQ(k.config.output_tensors->dtype, DataType::kFp8E4M3);
  EXPECT_FALSE(k.config.output_tensors->is_dynamic);
  EXPECT_EQ(k.config.weight->dtype, DataType::kFp8E4M3);
  EXPECT_EQ(k.kv_cache_index, 0);
  EXPECT_EQ(ResolveLayer(c, "model.layers.0.self_attn.v_proj", "Linear").kv_cache_index, 1);
  EXPECT_FALSE(ResolveLayer(c, "model.layers.0.self_attn.q_proj", "Linear")
                   .config.output_tensors.has_value());
}

TEST(ValidateTest, EveryViolationIsReportedWithItsPath) {
  QuantConfig c;
  QuantSpec mx;
  mx.dtype = DataType::kMxFp4;
  mx.qscheme = QScheme::kPerGroup;
  mx.symmetric = false;  // 1: MX asymmetric
  c.global_quant_config.weight = mx;
  QuantSpec act = IntSpec(DataType::kInt8, QScheme::kPerGroup, 64);  // 2: static per-group input
  c.global_quant_config.input_tensors = act;
  c.layer_quant_config.push_back(
      {"*down_proj", WeightOnly(IntSpec(DataType::kInt4, QScheme::kPerGroup, -8))});       // 3
  c.layer_type_quant_config.push_back({"Linearr", WeightOnly(IntSpec(DataType::kInt8))});  // 4
  c.exclude = {""};                                                                        // 5
  GptqOptions gptq;
  gptq.damp_percent = 2.0;  // 6
  c.algorithms.push_back({gptq, {"damp_percent"}});
  c.min_kv_scale = -1;  // 7
  const Status s = ValidateConfig(c, PathStyle::kProto, "spec.quantization.config.");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.reason(), "INVALID_QUANT_CONFIG");
  EXPECT_EQ(Fields(s),
            (std::vector<std::string>{
                "spec.quantization.config.global_quant_config.input_tensors.is_dynamic",
                "spec.quantization.config.global_quant_config.weight.symmetric",
                "spec.quantization.config.layer_type_quant_config[0].layer_type",
                "spec.quantization.config.layer_quant_config[0].config.weight.group_size",
                "spec.quantization.config.exclude[0]",
                "spec.quantization.config.algorithms[0].gptq.damp_percent",
                "spec.quantization.config.min_kv_scale"}));
  EXPECT_NE(s.message().find("7 violations in the quantization config; the first: "), std::string::npos);
  // The reference-JSON spelling of the same paths.
  const Status j = ValidateConfig(c, PathStyle::kReferenceJson);
  EXPECT_EQ(Fields(j)[3], "layer_quant_config.*down_proj.weight.group_size");
  EXPECT_EQ(Fields(j)[5], "algo_config[0].damp_percent");
  EXPECT_EQ(Fields(j)[6], "export.min_kv_scale");
}

TEST(ValidateTest, ExcludeRegexMustCompile) {
  QuantConfig c;
  c.exclude = {"re:.*self_attn.*", "re:(unclosed", "re:"};
  const Status s = ValidateConfig(c);
  EXPECT_EQ(Fields(s), (std::vector<std::string>{"exclude[1]", "exclude[2]"}));
  EXPECT_NE(s.violations()[0].description.find("not a valid regular expression"),
            std::string::npos);
}

TEST(ValidateTest, PatternsAreBoundedInLengthCountAndProgramSize) {
  QuantConfig c;
  c.exclude = {"re:" + std::string(1025, 'a'), std::string(1025, '*'),
               "re:\\pL{1000}\\pL{1000}\\pL{1000}", "re:(a)\\1"};
  c.layer_quant_config.push_back({std::string(2000, '?'), {}});
  Status s = ValidateConfig(c, PathStyle::kProto, "spec.quantization.config.");
  EXPECT_EQ(Fields(s), (std::vector<std::string>{
                           "spec.quantization.config.layer_quant_config[0].pattern",
                           "spec.quantization.config.exclude[0]",
                           "spec.quantization.config.exclude[1]",
                           "spec.quantization.config.exclude[2]",
                           "spec.quantization.config.exclude[3]"}));
  EXPECT_EQ(s.violations()[0].description, "the glob is 2000 characters; at most 1024");
  EXPECT_EQ(s.violations()[1].description,
            "the regular expression is 1025 characters; at most 1024");
  EXPECT_NE(s.violations()[3].description.find("RE2: pattern too large"), std::string::npos);
  EXPECT_NE(s.violations()[4].description.find("RE2: invalid escape sequence: \\1"),
            std::string::npos)
      << s;

  QuantConfig many;
  for (int i = 0; i < 600; ++i) many.exclude.push_back("*x" + std::to_string(i));
  for (int i = 0; i < 401; ++i) many.layer_quant_config.push_back({"*y" + std::to_string(i), {}});
  s = ValidateConfig(many);
  EXPECT_EQ(Fields(s), std::vector<std::string>{"exclude"});
  EXPECT_EQ(s.violations()[0].description,
            "the config holds 1001 layer name patterns (exclude 600, layer_quant_config 401, "
            "kv_cache_quant_config 0); at most 1000");
}

TEST(ValidateForLayersTest, StopsAtTheDeadline) {
  QuantConfig c;
  c.global_quant_config.weight = QuantSpec{};
  c.exclude = {"*no_such_layer"};
  std::vector<LayerInfo> layers;
  for (int i = 0; i < 10; ++i) layers.push_back({"model.layers." + std::to_string(i) + ".q", "Linear", 8, 8});
  LayerCheck done = ValidateForLayers(c, layers);
  EXPECT_FALSE(done.out_of_time);
  EXPECT_EQ(done.warnings.size(), 1u);
  LayerCheck stopped = ValidateForLayers(c, layers, PathStyle::kProto, "",
                                         Deadline::After(std::chrono::milliseconds(-1)));
  EXPECT_TRUE(stopped.out_of_time);
  EXPECT_TRUE(stopped.warnings.empty());  // nothing made up
}

TEST(ValidateTest, KvCacheEntriesNeedAnOutputSpec) {
  QuantConfig c;
  c.kv_cache_quant_config.push_back({"*k_proj", LayerQuantConfig()});
  EXPECT_EQ(Fields(ValidateConfig(c)),
            (std::vector<std::string>{"kv_cache_quant_config[0].config.output_tensors"}));
}

TEST(ValidateForLayersTest, GroupSizesThatDoNotDivideALayerAndUnmatchedGlobs) {
  auto preset = PresetConfig("w_int4_per_group_sym", 64);
  ASSERT_TRUE(preset.ok());
  QuantConfig c = *preset;
  c.layer_quant_config.push_back({"*.no_such_layer", WeightOnly(IntSpec(DataType::kInt8))});
  c.exclude.push_back("model.layers.4");
  std::vector<LayerInfo> layers;
  for (int b = 0; b < 5; ++b) {
    const std::string p = "model.layers." + std::to_string(b);
    layers.push_back({p + ".self_attn.q_proj", "Linear", 64, 64});
    layers.push_back({p + ".mlp.down_proj", "Linear", 64, 172});  // 172 % 64 != 0
  }
  layers.push_back({"lm_head", "Linear", 512, 64});
  layers.push_back({"model.embed_tokens", "Embedding", 512, 64});
  const LayerCheck check = ValidateForLayers(c, layers);
  ASSERT_FALSE(check.status.ok());
  ASSERT_EQ(check.status.violations().size(), 1u);
  const FieldViolation& v = check.status.violations()[0];
  EXPECT_EQ(v.field, "global_quant_config.weight.group_size");
  // Layers 0..3 (layer 4 is excluded), named in the message.
  EXPECT_NE(v.description.find("group_size 64 does not divide the width 172"), std::string::npos)
      << v.description;
  EXPECT_NE(v.description.find("4 layers"), std::string::npos) << v.description;
  EXPECT_NE(v.description.find("model.layers.0.mlp.down_proj"), std::string::npos);
  EXPECT_EQ(v.description.find("model.layers.4"), std::string::npos);
  EXPECT_EQ(
      check.warnings,
      (std::vector<std::string>{"layer_quant_config glob '*.no_such_layer' matches no layer"}));

  // A group size that divides every layer: OK.
  auto fine = PresetConfig("w_int4_per_group_sym", 4);
  ASSERT_TRUE(fine.ok());
  EXPECT_TRUE(ValidateForLayers(*fine, layers).status.ok());
  // MX pads its last block: no violation for 172.
  auto mx = PresetConfig("w_mxfp4_a_mxfp4");
  ASSERT_TRUE(mx.ok());
  EXPECT_TRUE(ValidateForLayers(*mx, layers).status.ok());
}

TEST(DescribeTest, SummaryNamesEachPart) {
  auto preset = PresetConfig("w_fp8_a_fp8");
  ASSERT_TRUE(preset.ok());
  QuantConfig c = *preset;
  AddFp8KvCache(c);
  const std::string d = DescribeConfig(c);
  EXPECT_NE(d.find("global: weight fp8_e4m3 per_tensor; input fp8_e4m3 per_tensor"),
            std::string::npos)
      << d;
  EXPECT_NE(d.find("kv cache *k_proj: fp8_e4m3 per_tensor"), std::string::npos) << d;
  EXPECT_NE(d.find("exclude: lm_head"), std::string::npos) << d;
}

}  // namespace
}  // namespace quantd::config
