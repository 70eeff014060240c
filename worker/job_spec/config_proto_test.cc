#include "worker/job_spec/config_proto.h"

#include <set>
#include <string>
#include <vector>

#include "google/protobuf/text_format.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "worker/config/presets.h"
#include "worker/config/quark_json.h"
#include "worker/job_spec/testing/five_mistakes.h"

namespace quantd::config {
namespace {

namespace pb = quantd::v1;
using quant::DataType;
using quant::QScheme;

template <typename M>
M Text(const std::string& text) {
  M m;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &m)) << text;
  return m;
}

std::vector<std::string> Fields(const Status& s) {
  std::vector<std::string> out;
  for (const FieldViolation& v : s.violations()) out.push_back(v.field);
  return out;
}

std::vector<AlgorithmConfig> EveryAlgorithm() {
  GptqOptions gptq;
  gptq.damp_percent = 0.05;
  gptq.block_size = 64;
  gptq.act_order = true;
  AwqOptions awq;
  awq.grid = 10;
  awq.clip = false;
  awq.clip_max_tokens = 256;
  SmoothQuantOptions smooth;
  smooth.alpha = 0.6;
  smooth.alpha_overrides = {{"*.mlp.*", 0.3}, {"*q_proj", 0.8}};  // sorted by glob
  AutoSmoothQuantOptions auto_smooth;
  auto_smooth.alpha_step = 0.1;
  RotationOptions rotation;
  rotation.seed = 7;
  rotation.online_down_proj = true;
  return {{gptq, {"damp_percent", "block_size"}},
          {awq, {"grid_size", "clip_max_tokens"}},
          {smooth, {"alpha"}},
          {auto_smooth, {"alpha_step"}},
          {rotation, {"seed"}}};
}

TEST(ConfigProtoTest, EnginePresetsSurviveProtoBothWays) {
  for (const std::string& name : PresetNames()) {
    auto preset = PresetConfig(name);
    ASSERT_TRUE(preset.ok()) << name;
    QuantConfig c = *preset;
    AddFp8KvCache(c);
    c.layer_type_quant_config.push_back({"Linear", c.global_quant_config});
    c.layer_quant_config.push_back({"*down_proj", c.global_quant_config});
    c.min_kv_scale = 1e-4;
    const pb::QuantConfig p = ToProto(c);
    auto back = FromProto(p);
    ASSERT_TRUE(back.ok()) << name << ": " << back.status();
    EXPECT_EQ(*back, c) << name;
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(ToProto(*back), p)) << name;
  }
  QuantConfig algos;
  algos.algorithms = EveryAlgorithm();
  auto back = FromProto(ToProto(algos));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->algorithms, algos.algorithms);
}

TEST(ConfigProtoTest, UnsetProtoFieldsTakeTheReferenceDefaults) {
  auto c = FromProto(Text<pb::QuantConfig>(R"pb(
    global_quant_config {
      weight { dtype: INT4 qscheme: PER_GROUP group_size: 64 ch_axis: 1 }
      input_tensors { dtype: MXFP4 is_dynamic: true }
    }
    exclude: "lm_head"
  )pb"));
  ASSERT_TRUE(c.ok()) << c.status();
  const QuantSpec& w = *c->global_quant_config.weight;
  EXPECT_EQ(w.dtype, DataType::kInt4);
  EXPECT_TRUE(w.symmetric);
  EXPECT_EQ(w.round_method, quant::RoundMethod::kHalfEven);
  EXPECT_EQ(w.scale_type, quant::ScaleType::kFloat);
  EXPECT_EQ(w.observer, quant::ObserverType::kMinMax);
  EXPECT_EQ(w.zero_point_type, quant::ZeroPointType::kInt32);
  const QuantSpec& a = *c->global_quant_config.input_tensors;
  EXPECT_EQ(a.qscheme, QScheme::kPerGroup);  // MX is a block format
  EXPECT_EQ(a.mx_scale_mode, quant::MxScaleMode::kEven);
  EXPECT_FALSE(c->global_quant_config.output_tensors.has_value());
}

TEST(ResolveSettingsTest, PresetWithJobLevelExtras) {
  auto s = Text<pb::QuantizationSettings>(R"pb(
    scheme: "w_int4_per_group_sym"
    group_size: 32
    exclude: "model.layers.0.*"
    algorithms { gptq { damp_percent: 0.02 act_order: true } }
    fp8_kv_cache: true
  )pb");
  auto c = ResolveQuantizationSettings(s);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->global_quant_config.weight->group_size, 32);
  EXPECT_EQ(c->exclude, (std::vector<std::string>{"lm_head", "model.layers.0.*"}));
  ASSERT_EQ(c->algorithms.size(), 1u);
  const auto& gptq = std::get<GptqOptions>(c->algorithms[0].options);
  EXPECT_EQ(gptq.damp_percent, 0.02);
  EXPECT_TRUE(gptq.act_order);
  EXPECT_EQ(c->algorithms[0].given, std::set<std::string>{"damp_percent"});
  ASSERT_EQ(c->kv_cache_quant_config.size(), 2u);
  const ResolvedLayer v = ResolveLayer(*c, "model.layers.2.self_attn.v_proj", "Linear");
  EXPECT_EQ(v.config.output_tensors->dtype, DataType::kFp8E4M3);
  EXPECT_EQ(v.config.weight->dtype, DataType::kInt4);
  EXPECT_FALSE(ResolveLayer(*c, "model.layers.0.self_attn.v_proj", "Linear").quantized);
  EXPECT_EQ(DescribeSettings(s, *c),
            "w_int4_per_group_sym (group 32), kv cache fp8_e4m3 per_tensor, algorithms gptq");

  auto defaults = ResolveQuantizationSettings(
      Text<pb::QuantizationSettings>(R"pb(scheme: "w_uint4_per_group_asym")pb"));
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(defaults->global_quant_config.weight->group_size, 128);
}

TEST(ResolveSettingsTest, StructuredConfigAndQuarkJsonSources) {
  auto s = Text<pb::QuantizationSettings>(R"pb(
    config {
      global_quant_config {
        weight { dtype: FP8_E4M3 qscheme: PER_TENSOR }
        input_tensors { dtype: FP8_E4M3 qscheme: PER_TENSOR }
      }
      layer_quant_config {
        pattern: "*down_proj"
        config { weight { dtype: INT8 qscheme: PER_CHANNEL ch_axis: 0 } }
      }
      exclude: "lm_head"
    }
    exclude: "model.layers.4.*"
  )pb");
  auto c = ResolveQuantizationSettings(s);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->exclude, (std::vector<std::string>{"lm_head", "model.layers.4.*"}));
  EXPECT_EQ(ResolveLayer(*c, "model.layers.1.mlp.down_proj", "Linear").config.weight->dtype,
            DataType::kInt8);
  EXPECT_EQ(DescribeSettings(s, *c),
            "config: global: weight fp8_e4m3 per_tensor; input fp8_e4m3 per_tensor (+1 layer "
            "configs)");

  // The same config as the reference JSON gives the same engine config.
  pb::QuantizationSettings j;
  j.set_quark_json(WriteQuarkJson(*c));
  auto from_json = ResolveQuantizationSettings(j);
  ASSERT_TRUE(from_json.ok()) << from_json.status();
  EXPECT_EQ(*from_json, *c);
}

TEST(ResolveSettingsTest, FiveMistakesGiveFiveViolations) {
  auto s = Text<pb::QuantizationSettings>(job_spec::testing::kFiveMistakesSettings);
  auto c = ResolveQuantizationSettings(s);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(c.status().reason(), "INVALID_QUANT_CONFIG");
  EXPECT_EQ(Fields(c.status()),
            (std::vector<std::string>{
                "spec.quantization.config.global_quant_config.weight.dtype",
                "spec.quantization.config.global_quant_config.input_tensors.is_dynamic",
                "spec.quantization.config.layer_type_quant_config[0].layer_type",
                "spec.quantization.config.layer_quant_config[0].config.weight.symmetric",
                "spec.quantization.config.layer_quant_config[1].config.weight.group_size"}));
  EXPECT_NE(c.status().message().find("5 violations in the quantization config; the first: "),
            std::string::npos)
      << c.status();
  EXPECT_NE(c.status().violations()[2].description.find("Linaer"), std::string::npos);
}

TEST(ResolveSettingsTest, SettingsLevelMistakesAreAllReported) {
  auto s = Text<pb::QuantizationSettings>(R"pb(
    scheme: "w_int5_per_group_sym"
    group_size: 0
    exclude: ""
    algorithms {}
    algorithms { smooth_quant { alpha: 1.5 } }
  )pb");
  auto c = ResolveQuantizationSettings(s);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(
      Fields(c.status()),
      (std::vector<std::string>{"spec.quantization.scheme", "spec.quantization.group_size",
                                "spec.quantization.exclude[0]", "spec.quantization.algorithms[0]",
                                "spec.quantization.algorithms[1].smooth_quant.alpha"}));

  // group_size only sizes presets; a JSON error keeps the JSON's own path.
  pb::QuantizationSettings j;
  j.set_quark_json(R"({"global_quant_config": {"weight": {"dtype": "int4", "qscheme":
      "per_group", "group_size": 128, "symmetric": false, "scale_calculation_mode": "odd"}}})");
  j.set_group_size(64);
  auto jc = ResolveQuantizationSettings(j);
  ASSERT_FALSE(jc.ok());
  EXPECT_EQ(Fields(jc.status()),
            (std::vector<std::string>{
                "spec.quantization.quark_json.global_quant_config.weight.scale_calculation_mode",
                "spec.quantization.group_size"}));

  EXPECT_EQ(Fields(ResolveQuantizationSettings(pb::QuantizationSettings()).status()),
            std::vector<std::string>{"spec.quantization"});
  pb::QuantizationSettings not_json;
  not_json.set_quark_json("{\"global_quant_config\": ");
  EXPECT_EQ(Fields(ResolveQuantizationSettings(not_json).status()),
            std::vector<std::string>{"spec.quantization.quark_json"});
}

TEST(ResolveSettingsTest, LayerChecksUseSettingsPaths) {
  std::vector<LayerInfo> layers;
  for (int b = 0; b < 2; ++b) {
    const std::string p = "model.layers." + std::to_string(b);
    layers.push_back({p + ".self_attn.q_proj", "Linear", 64, 64});
    layers.push_back({p + ".mlp.down_proj", "Linear", 64, 172});
  }
  auto preset = Text<pb::QuantizationSettings>(R"pb(scheme: "w_int4_per_group_sym"
                                                    group_size: 32
                                                    exclude: "*.nothing")pb");
  auto c = ResolveQuantizationSettings(preset);
  ASSERT_TRUE(c.ok());
  LayerCheck check = ValidateSettingsForLayers(preset, *c, layers);
  ASSERT_EQ(Fields(check.status), std::vector<std::string>{"spec.quantization.group_size"});
  EXPECT_NE(check.status.violations()[0].description.find("w_int4_per_group_sym: group_size 32 "
                                                          "does not divide the width 172"),
            std::string::npos)
      << check.status;
  EXPECT_EQ(check.warnings,
            (std::vector<std::string>{"exclude glob 'lm_head' matches no layer",
                                      "exclude glob '*.nothing' matches no layer"}));

  auto config = Text<pb::QuantizationSettings>(R"pb(
    config {
      global_quant_config { weight { dtype: INT8 qscheme: PER_CHANNEL } }
      layer_quant_config {
        pattern: "*down_proj"
        config { weight { dtype: INT4 qscheme: PER_GROUP group_size: 64 } }
      }
    }
  )pb");
  c = ResolveQuantizationSettings(config);
  ASSERT_TRUE(c.ok()) << c.status();
  check = ValidateSettingsForLayers(config, *c, layers);
  EXPECT_EQ(Fields(check.status),
            std::vector<std::string>{
                "spec.quantization.config.layer_quant_config[0].config.weight.group_size"});
  pb::QuantizationSettings json;
  json.set_quark_json(WriteQuarkJson(*c));
  check = ValidateSettingsForLayers(json, *c, layers);
  EXPECT_EQ(Fields(check.status),
            std::vector<std::string>{
                "spec.quantization.quark_json.layer_quant_config.*down_proj.weight.group_size"});
}

}  // namespace
}  // namespace quantd::config
