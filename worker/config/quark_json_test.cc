#include "worker/config/quark_json.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "worker/config/presets.h"

namespace quantd::config {
namespace {

using Json = nlohmann::ordered_json;
using quant::DataType;
using quant::QScheme;

// The shapes below follow quantization_config objects of Quark-exported
// checkpoints (config.json): an FP8 W8A8 + FP8 KV-cache export of the 0.x
// series (kv specs as layer_quant_config entries named in
// export.kv_cache_group, nulls for unset spec fields), an MXFP4 export with
// the newer per-spec keys, and an FP8 per-channel / dynamic per-tensor export
// with regex excludes and version keys.
constexpr const char* kFp8Spec = R"({
  "ch_axis": null, "dtype": "fp8_e4m3", "group_size": null, "is_dynamic": false,
  "observer_cls": "PerTensorMinMaxObserver", "qscheme": "per_tensor",
  "round_method": null, "scale_type": null, "symmetric": null})";

std::string Fp8KvConfigJson() {
  const std::string fp8 = kFp8Spec;
  return R"({
  "architectures": ["LlamaForCausalLM"],
  "hidden_size": 4096,
  "quantization_config": {
    "activation_scheme": "static",
    "algo_config": null,
    "exclude": ["lm_head"],
    "export": {"kv_cache_group": ["*k_proj", "*v_proj"], "min_kv_scale": 0.0,
               "pack_method": "reorder", "weight_format": "real_quantized",
               "weight_merge_groups": null},
    "global_quant_config": {"bias": null, "input_tensors": )" +
         fp8 + R"(, "output_tensors": null, "weight": )" + fp8 + R"(},
    "layer_quant_config": {
      "*k_proj": {"bias": null, "input_tensors": )" +
         fp8 + R"(, "output_tensors": )" + fp8 + R"(, "weight": )" + fp8 + R"(},
      "*v_proj": {"bias": null, "input_tensors": )" +
         fp8 + R"(, "output_tensors": )" + fp8 + R"(, "weight": )" + fp8 + R"(}
    },
    "layer_type_quant_config": {},
    "quant_method": "quark",
    "quant_mode": "eager_mode"
  },
  "torch_dtype": "bfloat16"
})";
}

std::string MxFp4Spec(bool dynamic) {
  return std::string(R"({"block_size": null, "ch_axis": -1, "dtype": "fp4",
    "enable_buffer_reuse": false, "group_size": 32, "is_dynamic": )") +
         (dynamic ? "true" : "false") + R"(, "is_scale_quant": false,
    "max_input_numel": 4194304, "mx_element_dtype": null, "observer_cls": "PerBlockMXObserver",
    "qscheme": "per_group", "round_method": "half_even", "scale_calculation_mode": "even",
    "scale_format": "e8m0", "scale_type": "float", "symmetric": null})";
}

std::string MxFp4ConfigJson() {
  return R"({
  "algo_config": null,
  "exclude": ["lm_head", "*.mlp.gate"],
  "export": {"kv_cache_group": [], "min_kv_scale": 0.0, "pack_method": "reorder",
             "weight_format": "real_quantized", "weight_merge_groups": null},
  "global_quant_config": {"bias": null, "input_tensors": )" +
         MxFp4Spec(true) + R"(, "output_tensors": null, "target_device": null, "weight": )" +
         MxFp4Spec(false) + R"(},
  "kv_cache_quant_config": {},
  "layer_quant_config": {},
  "layer_type_quant_config": {},
  "quant_method": "quark",
  "quant_mode": "eager_mode",
  "version": "0.10"
})";
}

constexpr const char* kFp8PerChannelDynamicJson = R"({
  "global_quant_config": {
    "input_tensors": {"dtype": "fp8_e4m3", "is_dynamic": true, "qscheme": "per_tensor",
      "ch_axis": null, "group_size": null, "symmetric": true, "round_method": "half_even",
      "scale_type": "float", "scale_format": null, "scale_calculation_mode": null,
      "mx_element_dtype": null, "observer_cls": "PerTensorMinMaxObserver",
      "is_scale_quant": false},
    "output_tensors": null,
    "weight": {"dtype": "fp8_e4m3", "is_dynamic": false, "qscheme": "per_channel",
      "ch_axis": 0, "group_size": null, "symmetric": true, "round_method": "half_even",
      "scale_type": "float", "scale_format": null, "scale_calculation_mode": null,
      "mx_element_dtype": null, "observer_cls": "PerChannelMinMaxObserver",
      "is_scale_quant": false},
    "bias": null,
    "target_device": null
  },
  "algo_config": null,
  "softmax_quant_spec": null,
  "quant_method": "quark",
  "layer_type_quant_config": {},
  "layer_quant_config": {},
  "kv_cache_quant_config": {},
  "kv_cache_post_rope": false,
  "quant_mode": "eager_mode",
  "version": "0.11",
  "export": {"kv_cache_group": [], "min_kv_cache": 0.0, "pack_method": null,
             "weight_format": "real_quantized", "weight_merge_groups": null},
  "exclude": ["re:lm_head", "re:.*self_attn.*"]
})";

constexpr const char* kAwqInt4Json = R"({
  "quant_method": "quark",
  "global_quant_config": {
    "input_tensors": null, "output_tensors": null, "bias": null,
    "weight": {"dtype": "uint4", "is_dynamic": false, "qscheme": "per_group", "ch_axis": 1,
      "group_size": 128, "symmetric": false, "round_method": "half_even", "scale_type": "float",
      "observer_cls": "PerGroupMinMaxObserver", "zero_point_type": "float32"}
  },
  "layer_type_quant_config": {},
  "layer_quant_config": {
    "*down_proj": {"input_tensors": null, "output_tensors": null, "bias": null,
      "weight": {"dtype": "int8", "is_dynamic": false, "qscheme": "per_channel", "ch_axis": 0,
        "group_size": null, "symmetric": true, "round_method": "half_even",
        "scale_type": "float", "observer_cls": "PerChannelMinMaxObserver"}}
  },
  "exclude": ["lm_head"],
  "algo_config": [{"name": "awq", "scaling_layers": [
      {"prev_op": "input_layernorm", "layers": ["self_attn.q_proj", "self_attn.k_proj"],
       "inp": "self_attn.q_proj", "module2inspect": "self_attn"}],
    "model_decoder_layers": "model.layers"}],
  "quant_mode": "eager_mode"
})";

Json Parse(const std::string& text) { return Json::parse(text); }

QuantConfig MustParse(const std::string& text) {
  auto c = ParseQuarkJson(text);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *c : QuantConfig();
}

std::vector<std::string> Fields(const Status& s) {
  std::vector<std::string> out;
  for (const FieldViolation& v : s.violations()) out.push_back(v.field);
  return out;
}

TEST(QuarkJsonTest, Fp8KvCacheExportParsesResolvesAndRoundTrips) {
  const std::string text = Fp8KvConfigJson();
  const QuantConfig c = MustParse(text);  // a whole config.json
  const QuantSpec& w = *c.global_quant_config.weight;
  EXPECT_EQ(w.dtype, DataType::kFp8E4M3);
  EXPECT_EQ(w.qscheme, QScheme::kPerTensor);
  EXPECT_FALSE(w.is_dynamic);
  EXPECT_TRUE(w.symmetric);
  EXPECT_EQ(w.round_method, quant::RoundMethod::kHalfEven);
  ASSERT_TRUE(c.global_quant_config.input_tensors.has_value());
  EXPECT_FALSE(c.global_quant_config.output_tensors.has_value());
  ASSERT_EQ(c.layer_quant_config.size(), 2u);
  EXPECT_EQ(c.layer_quant_config[0].pattern, "*k_proj");
  EXPECT_EQ(c.exclude, std::vector<std::string>{"lm_head"});

  const ResolvedLayer k = ResolveLayer(c, "model.layers.3.self_attn.k_proj", "Linear");
  ASSERT_TRUE(k.config.output_tensors.has_value());
  EXPECT_EQ(k.config.output_tensors->dtype, DataType::kFp8E4M3);
  EXPECT_FALSE(ResolveLayer(c, "model.layers.3.self_attn.q_proj", "Linear")
                   .config.output_tensors.has_value());
  EXPECT_FALSE(ResolveLayer(c, "lm_head", "Linear").quantized);

  // Writing it back gives the quantization_config object, key order and nulls
  // included.
  EXPECT_EQ(Parse(WriteQuarkJson(c)), Parse(text).at("quantization_config"));
  // And parsing the written form gives the same engine config.
  EXPECT_EQ(MustParse(WriteQuarkJson(c)), c);
}

TEST(QuarkJsonTest, MxFp4ExportRoundTripsWithKeysTheEngineDoesNotModel) {
  const std::string text = MxFp4ConfigJson();
  const QuantConfig c = MustParse(text);
  const QuantSpec& w = *c.global_quant_config.weight;
  EXPECT_EQ(w.dtype, DataType::kMxFp4);
  EXPECT_EQ(w.qscheme, QScheme::kPerGroup);
  EXPECT_EQ(w.group_size, 32);
  EXPECT_EQ(w.ch_axis, -1);
  EXPECT_FALSE(w.is_dynamic);
  EXPECT_EQ(w.mx_scale_mode, quant::MxScaleMode::kEven);
  EXPECT_TRUE(c.global_quant_config.input_tensors->is_dynamic);
  EXPECT_EQ(c.exclude, (std::vector<std::string>{"lm_head", "*.mlp.gate"}));
  EXPECT_EQ(Parse(WriteQuarkJson(c)), Parse(text));
  EXPECT_EQ(WriteQuarkJson(c, -1), Parse(text).dump());
}

TEST(QuarkJsonTest, Fp8PerChannelDynamicExportRoundTrips) {
  const QuantConfig c = MustParse(kFp8PerChannelDynamicJson);
  EXPECT_EQ(c.global_quant_config.weight->qscheme, QScheme::kPerChannel);
  EXPECT_EQ(c.global_quant_config.weight->ch_axis, 0);
  EXPECT_TRUE(c.global_quant_config.input_tensors->is_dynamic);
  EXPECT_EQ(c.exclude, (std::vector<std::string>{"re:lm_head", "re:.*self_attn.*"}));
  EXPECT_EQ(Parse(WriteQuarkJson(c)), Parse(kFp8PerChannelDynamicJson));
}

TEST(QuarkJsonTest, AlgorithmsAndLayerGlobsRoundTrip) {
  const QuantConfig c = MustParse(kAwqInt4Json);
  const QuantSpec& w = *c.global_quant_config.weight;
  EXPECT_EQ(w.dtype, DataType::kUInt4);
  EXPECT_EQ(w.group_size, 128);
  EXPECT_FALSE(w.symmetric);
  EXPECT_EQ(w.zero_point_type, quant::ZeroPointType::kFloat32);
  ASSERT_EQ(c.algorithms.size(), 1u);
  EXPECT_EQ(c.algorithms[0].kind(), AlgorithmKind::kAwq);
  EXPECT_EQ(ResolveLayer(c, "model.layers.0.mlp.down_proj", "Linear").config.weight->dtype,
            DataType::kInt8);
  EXPECT_EQ(Parse(WriteQuarkJson(c)), Parse(kAwqInt4Json));
}

TEST(QuarkJsonTest, AlgorithmNamesAcceptQuantdsSpellingsToo) {
  for (const char* name : {"smooth", "smoothquant", "smooth_quant"}) {
    const QuantConfig c = MustParse(std::string(R"({"global_quant_config": {"weight": {"dtype": "int8"}},
        "algo_config": [{"name": ")") + name + R"(", "alpha": 0.5}]})");
    ASSERT_EQ(c.algorithms.size(), 1u) << name;
    EXPECT_EQ(c.algorithms[0].kind(), AlgorithmKind::kSmoothQuant) << name;
    EXPECT_EQ(std::get<SmoothQuantOptions>(c.algorithms[0].options).alpha, 0.5) << name;
  }
  for (const char* name : {"autosmoothquant", "auto_smooth_quant"}) {
    const QuantConfig c = MustParse(std::string(R"({"global_quant_config": {"weight": {"dtype": "int8"}},
        "algo_config": [{"name": ")") + name + R"("}]})");
    ASSERT_EQ(c.algorithms.size(), 1u) << name;
    EXPECT_EQ(c.algorithms[0].kind(), AlgorithmKind::kAutoSmoothQuant) << name;
  }
}

TEST(QuarkJsonTest, ChangedFieldsAreWrittenAndUnmodelledKeysKept) {
  QuantConfig c = MustParse(MxFp4ConfigJson());
  c.global_quant_config.weight->mx_scale_mode = quant::MxScaleMode::kFloor;
  c.exclude.push_back("model.layers.0.*");
  const Json out = Parse(WriteQuarkJson(c));
  EXPECT_EQ(out.at("global_quant_config").at("weight").at("scale_calculation_mode"), "floor");
  EXPECT_EQ(out.at("global_quant_config").at("input_tensors").at("scale_calculation_mode"), "even");
  EXPECT_EQ(out.at("global_quant_config").at("weight").at("max_input_numel"), 4194304);
  EXPECT_EQ(out.at("version"), "0.10");
  EXPECT_EQ(out.at("exclude"), Json({"lm_head", "*.mlp.gate", "model.layers.0.*"}));
  EXPECT_EQ(MustParse(out.dump()), c);
}

TEST(QuarkJsonTest, EveryPresetSurvivesWriteThenParse) {
  for (const std::string& name : PresetNames()) {
    auto preset = PresetConfig(name);
    ASSERT_TRUE(preset.ok()) << name;
    QuantConfig c = *preset;
    AddFp8KvCache(c);
    const std::string text = WriteQuarkJson(c);
    auto back = ParseQuarkJson(text);
    ASSERT_TRUE(back.ok()) << name << ": " << back.status() << "\n" << text;
    EXPECT_EQ(*back, c) << name << "\n" << text;
    EXPECT_EQ(Parse(WriteQuarkJson(*back)), Parse(text)) << name;
  }
}

TEST(QuarkJsonTest, SpecSpellingOfTheReference) {
  auto preset = PresetConfig("w_int4_per_group_sym", 64);
  ASSERT_TRUE(preset.ok());
  const Json w = Parse(SpecToQuarkJson(*preset->global_quant_config.weight));
  EXPECT_EQ(w.at("dtype"), "int4");
  EXPECT_EQ(w.at("qscheme"), "per_group");
  EXPECT_EQ(w.at("group_size"), 64);
  EXPECT_EQ(w.at("ch_axis"), 1);
  EXPECT_EQ(w.at("symmetric"), true);
  EXPECT_EQ(w.at("observer_cls"), "PerGroupMinMaxObserver");
  auto mx = PresetConfig("w_mxfp6_e3m2_a_mxfp6_e3m2");
  ASSERT_TRUE(mx.ok());
  const Json m = Parse(SpecToQuarkJson(*mx->global_quant_config.weight));
  EXPECT_EQ(m.at("dtype"), "fp6_e3m2");
  EXPECT_EQ(m.at("scale_format"), "e8m0");
  EXPECT_EQ(m.at("group_size"), 32);
  EXPECT_TRUE(m.at("symmetric").is_null());
}

TEST(QuarkJsonTest, FiveMistakesGiveFiveViolationsInTheReferenceSpelling) {
  const char* bad = R"({
    "quant_method": "quark",
    "global_quant_config": {
      "weight": {"dtype": "int5", "qscheme": "per_tensor"},
      "input_tensors": {"dtype": "int8", "qscheme": "per_group", "group_size": 32,
                        "is_dynamic": false, "ch_axis": -1}
    },
    "layer_quant_config": {
      "*down_proj": {"weight": {"dtype": "fp4", "qscheme": "per_group", "group_size": 32,
                                "scale_format": "e8m0", "symmetric": false}},
      "*up_proj": {"weight": {"dtype": "int4", "qscheme": "per_group", "group_size": -8,
                              "ch_axis": 1}},
      "*gate_proj": {"weight": {"dtype": "int4", "qscheme": "per_channel",
                                "round_method": "stochastic"}}
    },
    "exclude": ["lm_head"]
  })";
  auto c = ParseQuarkJson(bad, "spec.quantization.quark_json.");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(c.status().reason(), "INVALID_QUANT_CONFIG");
  EXPECT_EQ(Fields(c.status()),
            (std::vector<std::string>{
                "spec.quantization.quark_json.global_quant_config.weight.dtype",
                "spec.quantization.quark_json.layer_quant_config.*gate_proj.weight.round_method",
                "spec.quantization.quark_json.global_quant_config.input_tensors.is_dynamic",
                "spec.quantization.quark_json.layer_quant_config.*down_proj.weight.symmetric",
                "spec.quantization.quark_json.layer_quant_config.*up_proj.weight.group_size"}));
  EXPECT_NE(c.status().violations()[0].description.find("unknown dtype 'int5'"), std::string::npos);
}

TEST(QuarkJsonTest, MalformedInputIsRefusedNotThrown) {
  EXPECT_EQ(ParseQuarkJson("{not json").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseQuarkJson("[1, 2]").status().code(), StatusCode::kInvalidArgument);
  auto other = ParseQuarkJson(R"({"quant_method": "gptq", "bits": 4})");
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(Fields(other.status()), std::vector<std::string>{"quant_method"});
  auto types = ParseQuarkJson(
      R"({"global_quant_config": {"weight": {"dtype": "int4", "group_size": "128"}},
          "exclude": "lm_head"})");
  ASSERT_FALSE(types.ok());
  EXPECT_EQ(Fields(types.status()),
            (std::vector<std::string>{"global_quant_config.weight.group_size", "exclude"}));
  // Two-stage weights (a list of specs) are refused by name.
  auto two_stage = ParseQuarkJson(
      R"({"global_quant_config": {"weight": [{"dtype": "fp8_e4m3"}, {"dtype": "int4"}]}})");
  ASSERT_FALSE(two_stage.ok());
  EXPECT_EQ(Fields(two_stage.status()), std::vector<std::string>{"global_quant_config.weight"});
}


TEST(QuarkJsonTest, DeepNestingIsRefusedBeforeAnythingRecursesIntoIt) {
  // An unknown key holding 300 000 '[': the frontend used to overflow its
  // stack copying and diffing the value after nlohmann parsed it.
  const std::string deep = std::string(300000, '[') + std::string(300000, ']');
  auto c = ParseQuarkJson(R"({"global_quant_config": {"weight": {"dtype": "int8"}}, "x": )" +
                              deep + "}",
                          "spec.quantization.quark_json.");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(c.status().reason(), "INVALID_QUANT_CONFIG");
  EXPECT_EQ(c.status().message(), "the quantization config is 600061 bytes; at most 262144");
  ASSERT_EQ(c.status().violations().size(), 1u);
  EXPECT_EQ(c.status().violations()[0].field, "spec.quantization.quark_json");

  // Within the size limit, the depth is what is refused.
  auto d = ParseQuarkJson(R"({"x": )" + std::string(100000, '[') + std::string(100000, ']') + "}");
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().message(), "the quantization config nests 100001 levels deep; at most 64");
  EXPECT_EQ(Fields(d.status()), std::vector<std::string>{"quark_json"});
  EXPECT_EQ(d.status().violations()[0].description, "nests 100001 levels deep; at most 64");
}

TEST(QuarkJsonTest, DeepestAcceptedUnknownKeyRoundTrips) {
  // 62 levels under the key: the config object is level 1, the key's value
  // level 2; the record kept for the round trip is deeper, and parses.
  const std::string deep = std::string(63, '[') + "1" + std::string(63, ']');
  const std::string text =
      R"({"global_quant_config": {"weight": {"dtype": "int8", "qscheme": "per_tensor"}}, "x": )" +
      deep + "}";
  auto c = ParseQuarkJson(text);
  ASSERT_TRUE(c.ok()) << c.status();
  const Json written = Json::parse(WriteQuarkJson(*c));
  EXPECT_EQ(written.at("x").dump(), deep);
}

TEST(QuarkJsonTest, UnknownKeysAreKeptOnlyUpToACap) {
  const std::string base =
      R"({"global_quant_config": {"weight": {"dtype": "int8", "qscheme": "per_tensor"}}, )";
  // 12 KiB of unknown keys: kept, and written back.
  auto small = ParseQuarkJson(base + R"("notes": ")" + std::string(12 << 10, 'n') + R"("})");
  ASSERT_TRUE(small.ok()) << small.status();
  EXPECT_EQ(Json::parse(WriteQuarkJson(*small)).at("notes").get<std::string>().size(), 12u << 10);

  // 20 KiB: refused, naming the keys, largest first.
  auto big = ParseQuarkJson(base + R"("notes": ")" + std::string(12 << 10, 'n') +
                                R"(", "export": {"extra": ")" + std::string(8 << 10, 'e') +
                                R"("}, "tiny": 1})",
                            "spec.quantization.quark_json.");
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Fields(big.status()), (std::vector<std::string>{
                                      "spec.quantization.quark_json.notes",
                                      "spec.quantization.quark_json.export.extra",
                                      "spec.quantization.quark_json.tiny"}));
  EXPECT_EQ(big.status().violations()[0].description,
            "not modelled by quantd, so kept as written for the round trip (12295 bytes); such "
            "keys may hold at most 16384 bytes in all, this config's hold 20499");
}

}  // namespace
}  // namespace quantd::config

namespace quantd::config {
namespace {

// Issue 25: one mistake of a spec (an unknown dtype, qscheme) no longer
// hides the others of the same spec.
TEST(QuarkJsonTest, AnUnknownDtypeDoesNotHideTheRestOfItsSpec) {
  const char* bad = R"({
    "quant_method": "quark",
    "global_quant_config": {
      "weight": {"dtype": "int5", "qscheme": "per_group", "group_size": -3, "ch_axis": 1},
      "input_tensors": {"dtype": "int8", "qscheme": "per_group", "group_size": 32,
                        "is_dynamic": false, "symmetric": true}
    },
    "layer_quant_config": {
      "*down_proj": {
        "weight": {"dtype": "int4", "qscheme": "per_sandwich", "symmetric": true,
                   "group_size": 0, "observer_cls": "PerTensorMSEObserver", "is_dynamic": true},
        "output_tensors": {"dtype": "fp4", "qscheme": "per_group", "group_size": 32,
                           "scale_format": "e8m0", "symmetric": false, "is_dynamic": true}
      }
    },
    "exclude": ["lm_head"]
  })";
  auto c = ParseQuarkJson(bad, "q.");
  ASSERT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Fields(c.status()), (std::vector<std::string>{
                                    "q.global_quant_config.weight.dtype",
                                    "q.global_quant_config.weight.group_size",
                                    "q.layer_quant_config.*down_proj.weight.qscheme",
                                    "q.layer_quant_config.*down_proj.weight.observer_cls",
                                    "q.global_quant_config.input_tensors.is_dynamic",
                                    "q.layer_quant_config.*down_proj.output_tensors.symmetric",
                                }));
  const Status status = c.status();
  const auto& v = status.violations();
  EXPECT_NE(v[0].description.find("unknown dtype 'int5'"), std::string::npos);
  EXPECT_EQ(v[1].description, "group_size must be positive (or -1 for the whole axis); got -3");
  EXPECT_NE(v[3].description.find("dynamic specs use min_max"), std::string::npos);
  EXPECT_EQ(c.status().message().rfind("6 violations in the quantization config; the first: ", 0),
            0u)
      << c.status().message();
}

TEST(QuarkJsonTest, QuarkOnlineIsReadAsQuarkWithANote) {
  const char* online = R"({"quant_method": "quark_online",
    "global_quant_config": {"weight": {"dtype": "int8", "qscheme": "per_channel", "ch_axis": 0}}})";
  auto c = ParseQuarkJson(online, "spec.quantization.quark_json.");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->global_quant_config.weight->dtype, DataType::kInt8);
  ASSERT_EQ(c->notes.size(), 1u);
  EXPECT_EQ(c->notes[0].rfind("spec.quantization.quark_json.quant_method: 'quark_online' is read "
                              "as 'quark'",
                              0),
            0u)
      << c->notes[0];
  // What quantd exports is quantized already: "quark".
  EXPECT_EQ(Parse(WriteQuarkJson(*c)).at("quant_method"), "quark");
  auto other = ParseQuarkJson(R"({"quant_method": "awq"})");
  EXPECT_EQ(Fields(other.status()), std::vector<std::string>{"quant_method"});
}

TEST(QuarkJsonTest, EveryKeptKeyThatTakesNoEffectGetsANote) {
  std::string text = MxFp4ConfigJson();
  // Keys of newer Quark versions, set.
  text.replace(text.rfind('}'), 1,
               R"(, "softmax_quant_spec": {"dtype": "fp8_e4m3", "qscheme": "per_tensor"},
               "kv_cache_post_rope": true})");
  auto c = ParseQuarkJson(text, "p.");
  ASSERT_TRUE(c.ok()) << c.status();
  std::vector<std::string> keys;
  for (const std::string& n : c->notes) {
    EXPECT_NE(n.find(": not used by quantd (kept as written in exported configs, but it takes no "
                     "effect)"),
              std::string::npos)
        << n;
    keys.push_back(n.substr(0, n.find(':')));
  }
  // Null and false values ask for nothing; "version" only describes.
  EXPECT_EQ(keys, (std::vector<std::string>{
                      "p.export.pack_method",
                      "p.export.weight_format",
                      "p.global_quant_config.input_tensors.max_input_numel",
                      "p.global_quant_config.weight.max_input_numel",
                      "p.softmax_quant_spec",
                      "p.kv_cache_post_rope",
                  }));
  // quantd's own form takes effect whole.
  for (const std::string& name : PresetNames()) {
    EXPECT_TRUE(MustParse(WriteQuarkJson(*PresetConfig(name))).notes.empty()) << name;
  }
  // export.min_kv_cache (not Quark's min_kv_scale) and export.weight_format.
  EXPECT_EQ(MustParse(kFp8PerChannelDynamicJson).notes.size(), 2u);
}

TEST(QuarkJsonTest, AwqScalingLayersAreReadAndChecked) {
  const QuantConfig c = MustParse(kAwqInt4Json);
  ASSERT_EQ(c.algorithms.size(), 1u);
  const auto& a = std::get<AwqOptions>(c.algorithms[0].options);
  EXPECT_EQ(a.model_decoder_layers, "model.layers");
  ASSERT_EQ(a.scaling_layers.size(), 1u);
  EXPECT_EQ(a.scaling_layers[0].prev_op, "input_layernorm");
  EXPECT_EQ(a.scaling_layers[0].layers,
            (std::vector<std::string>{"self_attn.q_proj", "self_attn.k_proj"}));
  EXPECT_EQ(a.scaling_layers[0].inp, "self_attn.q_proj");
  EXPECT_EQ(a.scaling_layers[0].module2inspect, "self_attn");
  EXPECT_TRUE(c.notes.empty()) << c.notes[0];
  auto bad = ParseQuarkJson(R"({"global_quant_config": {"weight": {"dtype": "int4"}},
      "algo_config": [{"name": "awq", "scaling_layers": [
        {"prev_op": "", "layers": ["mlp.down_proj"], "inp": "mlp.up_proj"}, {"layers": []}, 7]}]})");
  EXPECT_EQ(Fields(bad.status()), (std::vector<std::string>{
                                      "algo_config[0].scaling_layers[2]",
                                      "algo_config[0].scaling_layers[0].prev_op",
                                      "algo_config[0].scaling_layers[0].inp",
                                      "algo_config[0].scaling_layers[1].prev_op",
                                      "algo_config[0].scaling_layers[1].layers",
                                  }));
}

}  // namespace
}  // namespace quantd::config
