#include "worker/export/export_support.h"

#include <nlohmann/json.hpp>

#include "gtest/gtest.h"

namespace quantd::exporter {
namespace {

using gguf::GgmlType;
using quant::DataType;
using quant::QScheme;
using quant::QuantSpec;
using quant::TensorRole;

QuantSpec Spec(DataType t, QScheme q = QScheme::kPerTensor, std::optional<int> group = {},
               bool symmetric = true) {
  QuantSpec s;
  s.dtype = t;
  s.qscheme = q;
  s.group_size = group;
  s.symmetric = symmetric;
  return s;
}

TEST(ExportSupport, Mxfp6ToGgufIsRefusedNamingFormatAndReason) {
  std::vector<ExportLayerSpecs> layers(2);
  layers[0].name = "model.layers.0.self_attn.q_proj";
  layers[0].weight = Spec(DataType::kInt4, QScheme::kPerGroup, 32);
  layers[1].name = "model.layers.0.mlp.down_proj";
  layers[1].weight = Spec(DataType::kMxFp6E2M3);
  Status s = CheckExportSupport(ExportFormat::kGguf, layers);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.reason(), "EXPORT_FORMAT_UNSUPPORTED");
  EXPECT_EQ(s.message().rfind("model.layers.0.mlp.down_proj weights: gguf cannot express "
                              "mxfp6_e2m3",
                              0),
            0u)
      << s.message();
  EXPECT_NE(s.message().find("E8M0"), std::string::npos);
  ASSERT_EQ(s.violations().size(), 1u);
  EXPECT_EQ(s.violations()[0].field, "model.layers.0.mlp.down_proj.weight");
  // The same model is fine as HF fake-quantized and HF quark.
  EXPECT_TRUE(CheckExportSupport(ExportFormat::kHfFakeQuantized, layers).ok());
  EXPECT_TRUE(CheckExportSupport(ExportFormat::kHfQuark, layers).ok());
  EXPECT_EQ(CheckExportSupport(ExportFormat::kOnnxQdq, layers).code(),
            StatusCode::kInvalidArgument);
}

TEST(ExportSupport, EachFormatsRules) {
  struct Case {
    ExportFormat format;
    QuantSpec spec;
    TensorRole role;
    bool ok;
  };
  QuantSpec dyn_token = Spec(DataType::kInt8, QScheme::kPerChannel);
  dyn_token.is_dynamic = true;
  dyn_token.ch_axis = 1;
  QuantSpec per_channel_in = Spec(DataType::kInt8, QScheme::kPerChannel);
  per_channel_in.ch_axis = 1;
  QuantSpec round_away = Spec(DataType::kInt8);
  round_away.round_method = quant::RoundMethod::kRound;
  const std::vector<Case> cases = {
      {ExportFormat::kHfQuark, Spec(DataType::kInt4, QScheme::kPerGroup, 128), TensorRole::kWeight,
       true},
      {ExportFormat::kHfQuark, Spec(DataType::kInt2, QScheme::kPerChannel), TensorRole::kWeight,
       false},
      {ExportFormat::kHfQuark, Spec(DataType::kMxInt8), TensorRole::kWeight, false},
      {ExportFormat::kHfQuark, Spec(DataType::kMxFp4), TensorRole::kWeight, true},
      {ExportFormat::kHfQuark, per_channel_in, TensorRole::kWeight, false},
      {ExportFormat::kHfQuark, dyn_token, TensorRole::kInput, true},
      {ExportFormat::kHfQuark, Spec(DataType::kFp8E4M3), TensorRole::kOutput, true},
      {ExportFormat::kHfQuark, Spec(DataType::kInt8, QScheme::kPerChannel), TensorRole::kInput,
       false},
      {ExportFormat::kHfQuark, Spec(DataType::kInt8), TensorRole::kBias, false},
      {ExportFormat::kGguf, Spec(DataType::kUInt4, QScheme::kPerGroup, 32, false),
       TensorRole::kWeight, true},
      {ExportFormat::kGguf, Spec(DataType::kFp8E4M3), TensorRole::kWeight, true},
      {ExportFormat::kGguf, Spec(DataType::kMxFp4), TensorRole::kWeight, true},
      {ExportFormat::kGguf, Spec(DataType::kMxFp6E2M3), TensorRole::kWeight, false},
      {ExportFormat::kGguf, Spec(DataType::kMxFp8E4M3), TensorRole::kWeight, false},
      {ExportFormat::kGguf, Spec(DataType::kInt8), TensorRole::kInput, false},
      {ExportFormat::kGguf, Spec(DataType::kFp8E4M3), TensorRole::kOutput, false},
      {ExportFormat::kOnnxQdq, Spec(DataType::kInt8, QScheme::kPerChannel), TensorRole::kWeight,
       true},
      {ExportFormat::kOnnxQdq, Spec(DataType::kUInt4, QScheme::kPerGroup, 32, false),
       TensorRole::kWeight, true},
      {ExportFormat::kOnnxQdq, Spec(DataType::kInt3, QScheme::kPerChannel), TensorRole::kWeight,
       false},
      {ExportFormat::kOnnxQdq, Spec(DataType::kMxFp8E4M3), TensorRole::kWeight, false},
      {ExportFormat::kOnnxQdq, Spec(DataType::kInt8), TensorRole::kInput, true},
      {ExportFormat::kOnnxQdq, Spec(DataType::kFp8E4M3), TensorRole::kInput, true},
      {ExportFormat::kOnnxQdq, dyn_token, TensorRole::kInput, false},
      {ExportFormat::kOnnxQdq, round_away, TensorRole::kInput, false},
      {ExportFormat::kHfFakeQuantized, Spec(DataType::kMxFp6E3M2), TensorRole::kWeight, true},
  };
  for (const Case& c : cases) {
    Status s = CheckExportSpec(c.format, c.spec, c.role);
    EXPECT_EQ(s.ok(), c.ok) << ExportFormatName(c.format) << " " << quant::DescribeSpec(c.spec)
                            << " " << quant::TensorRoleName(c.role) << ": " << s;
    if (!s.ok()) {
      EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
      EXPECT_EQ(s.message().rfind(ExportFormatName(c.format), 0), 0u) << s.message();
    }
  }
}

TEST(ExportSupport, CompressedTensorsTakesWhatVllmHasASchemeFor) {
  QuantSpec token = Spec(DataType::kInt8, QScheme::kPerChannel);
  token.is_dynamic = true;
  token.ch_axis = 1;
  QuantSpec dyn_tensor = Spec(DataType::kInt8);
  dyn_tensor.is_dynamic = true;
  QuantSpec channel = Spec(DataType::kInt8, QScheme::kPerChannel);
  channel.ch_axis = 0;
  QuantSpec group4 = Spec(DataType::kUInt4, QScheme::kPerGroup, 32, false);
  group4.ch_axis = 1;
  const QuantSpec fp8 = Spec(DataType::kFp8E4M3);
  auto check = [](std::optional<QuantSpec> w, std::optional<QuantSpec> in,
                  std::optional<QuantSpec> out = {},
                  const std::string& name = "model.layers.0.self_attn.q_proj") {
    return CheckExportSupport(ExportFormat::kCompressedTensors, {{name, w, {}, in, out}});
  };
  EXPECT_TRUE(check(group4, {}).ok());                                     // W4A16 asym group
  EXPECT_TRUE(check(channel, {}).ok());                                    // W8A16 channel
  EXPECT_TRUE(check(channel, token).ok());                                 // W8A8 dynamic per token
  EXPECT_TRUE(check(Spec(DataType::kInt8), Spec(DataType::kUInt8)).ok());  // W8A8 static
  EXPECT_TRUE(check(fp8, fp8).ok());
  EXPECT_TRUE(check(fp8, {}).ok());
  EXPECT_TRUE(check(fp8, fp8, fp8, "model.layers.0.self_attn.k_proj").ok());  // KV cache
  EXPECT_TRUE(check(fp8, fp8, fp8, "kv_cache_quant_config.*v_proj").ok());

  struct Refusal {
    Status status;
    std::string says;
  };
  const Refusal refusals[] = {
      {check(Spec(DataType::kInt4), {}), "per-channel or per-group scales"},
      {check(Spec(DataType::kInt2, QScheme::kPerGroup, 32), {}), "4- and 8-bit integers only"},
      {check(group4, Spec(DataType::kInt8)), "W4A16 is weight-only"},
      {check(Spec(DataType::kInt8, QScheme::kPerTensor, {}, false), Spec(DataType::kInt8)),
       "symmetric per-tensor or per-channel weights"},
      {check(channel, dyn_tensor), "per token only"},
      {check(channel, fp8), "integer weights with FP8 inputs"},
      {check(fp8, Spec(DataType::kInt8)), "FP8 weights with integer inputs"},
      {check(fp8, fp8, fp8), "only k_proj / v_proj outputs"},
      {check(fp8, fp8, fp8, "global_quant_config"), "only k_proj / v_proj outputs"},
      {check(Spec(DataType::kFp8E5M2), {}), "FP8 e4m3 only"},
      {check(Spec(DataType::kMxFp4, QScheme::kPerGroup, 32), {}), "MX layout"},
      {check(Spec(DataType::kBFloat16), {}), "cast scheme"},
      {check({}, Spec(DataType::kInt8)), "without weight quantization"},
  };
  for (const Refusal& r : refusals) {
    EXPECT_EQ(r.status.code(), StatusCode::kInvalidArgument) << r.says;
    EXPECT_EQ(r.status.reason(), "EXPORT_FORMAT_UNSUPPORTED") << r.status;
    EXPECT_NE(r.status.message().find("compressed_tensors"), std::string::npos) << r.status;
    EXPECT_NE(r.status.message().find(r.says), std::string::npos) << r.status;
    EXPECT_FALSE(r.status.violations().empty()) << r.status;
  }
}

TEST(ExportSupport, GgufTypeFollowsTheJobsCodes) {
  auto layers = [](std::vector<QuantSpec> specs) {
    std::vector<ExportLayerSpecs> out;
    for (auto& s : specs) out.push_back({"l" + std::to_string(out.size()), s, {}, {}, {}});
    return out;
  };
  EXPECT_EQ(DefaultGgufWeightType(layers({Spec(DataType::kInt4, QScheme::kPerGroup, 32)})),
            GgmlType::kQ4_0);
  EXPECT_EQ(DefaultGgufWeightType(layers({Spec(DataType::kUInt4, QScheme::kPerGroup, 32, false),
                                          Spec(DataType::kInt4, QScheme::kPerGroup, 128)})),
            GgmlType::kQ4_1);
  EXPECT_EQ(DefaultGgufWeightType(layers({Spec(DataType::kInt8, QScheme::kPerGroup, 32)})),
            GgmlType::kQ8_0);
  EXPECT_EQ(DefaultGgufWeightType(layers({Spec(DataType::kInt8, QScheme::kPerChannel, {}, false)})),
            GgmlType::kQ8_0);  // requantized, 8 bits kept
  EXPECT_EQ(DefaultGgufWeightType(layers({Spec(DataType::kInt4, QScheme::kPerGroup, 16)})),
            GgmlType::kQ4_1);
  EXPECT_EQ(DefaultGgufWeightType(layers({Spec(DataType::kFloat16)})), GgmlType::kF16);
  EXPECT_EQ(DefaultGgufWeightType({}), GgmlType::kF32);
  EXPECT_EQ(
      GgufCodesMismatch(Spec(DataType::kUInt8, QScheme::kPerGroup, 32, false), GgmlType::kQ8_0),
      "asymmetric 8-bit codes minus their zero point overflow int8");
  EXPECT_EQ(
      GgufCodesMismatch(Spec(DataType::kInt4, QScheme::kPerGroup, 32, false), GgmlType::kQ4_0),
      "Q4_0 has no zero point");
  EXPECT_EQ(
      GgufCodesMismatch(Spec(DataType::kInt4, QScheme::kPerGroup, 32, false), GgmlType::kQ4_1), "");
}

}  // namespace
}  // namespace quantd::exporter

namespace quantd::exporter {
namespace {

// A Gemma config.json as make_random_checkpoint writes it, with `changes`
// applied on top.
models::ModelConfig Gemma(const std::string& arch, int layers, const nlohmann::json& changes) {
  nlohmann::json c = {
      {"architectures", {arch == "gemma2" ? "Gemma2ForCausalLM" : "Gemma3ForCausalLM"}},
      {"model_type", arch == "gemma2" ? "gemma2" : "gemma3_text"},
      {"hidden_size", 256},
      {"intermediate_size", 768},
      {"num_hidden_layers", layers},
      {"num_attention_heads", 2},
      {"num_key_value_heads", 1},
      {"head_dim", 64},
      {"vocab_size", 512},
      {"max_position_embeddings", 4096},
      {"rms_norm_eps", 1e-6},
      {"rope_theta", 10000.0},
      {"hidden_activation", "gelu_pytorch_tanh"},
      {"query_pre_attn_scalar", 64},
      {"sliding_window", 32},
      {"tie_word_embeddings", true}};
  if (arch == "gemma2") {
    c["attn_logit_softcapping"] = 50.0;
    c["final_logit_softcapping"] = 30.0;
  } else {
    c["rope_local_base_freq"] = 10000.0;
  }
  if (changes.is_object()) c.update(changes);
  auto parsed = models::ParseModelConfig(c.dump(), "config.json");
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  return *parsed;
}

std::string GgufProblem(const models::ModelConfig& config) {
  return CheckArchitectureSupport(ExportFormat::kGguf, config).message();
}

TEST(ExportSupport, GgufTakesTheGemmaConfigsLlamaCppComputesAlike) {
  EXPECT_EQ(GgufProblem(Gemma("gemma2", 2, {})), "");
  EXPECT_EQ(GgufProblem(Gemma("gemma3", 7, {})), "");
  EXPECT_NE(GgufProblem(Gemma("gemma2", 2, {{"query_pre_attn_scalar", 128}}))
                .find("llama.cpp's gemma2 scales attention by 64^-0.5"),
            std::string::npos);
  EXPECT_NE(GgufProblem(Gemma("gemma2", 2, {{"attn_logit_softcapping", nullptr}}))
                .find("always soft-caps"),
            std::string::npos);
  EXPECT_NE(
      GgufProblem(Gemma("gemma2", 2, {{"tie_word_embeddings", false}})).find("tie_word_embeddings"),
      std::string::npos);
  EXPECT_NE(GgufProblem(Gemma("gemma3", 7, {{"attn_logit_softcapping", 50.0}}))
                .find("no attention soft-capping"),
            std::string::npos);
  // Full then sliding: no period of llama.cpp's gives that.
  EXPECT_NE(
      GgufProblem(Gemma("gemma2", 2, {{"layer_types", {"full_attention", "sliding_attention"}}}))
          .find("follow no such period"),
      std::string::npos);
  EXPECT_EQ(
      GgufProblem(Gemma("gemma2", 2, {{"layer_types", {"sliding_attention", "full_attention"}}})),
      "");
  // The refusal names the format and the way out.
  const Status s = CheckArchitectureSupport(ExportFormat::kGguf,
                                            Gemma("gemma3", 7, {{"attn_logit_softcapping", 50.0}}));
  EXPECT_EQ(s.reason(), "EXPORT_FORMAT_UNSUPPORTED");
  EXPECT_NE(s.message().find("export hf, hf_quark or compressed_tensors"), std::string::npos);
}

// OLMoE-1B-7B's config (no clip_qkv, no biases, its own head, no GQA, weights
// not renormalised) is what llama.cpp's olmoe computes; each departure is
// refused with its reason.
TEST(ExportSupport, GgufTakesTheOlmoeConfigsLlamaCppComputesAlike) {
  auto olmoe = [](const nlohmann::json& changes) {
    nlohmann::json c = {{"architectures", {"OlmoeForCausalLM"}},
                        {"hidden_size", 256},
                        {"intermediate_size", 512},
                        {"num_hidden_layers", 2},
                        {"num_attention_heads", 4},
                        {"num_key_value_heads", 4},
                        {"vocab_size", 512},
                        {"num_experts", 4},
                        {"num_experts_per_tok", 2},
                        {"clip_qkv", nullptr}};
    c.update(changes);
    auto parsed = models::ParseModelConfig(c.dump(), "config.json");
    EXPECT_TRUE(parsed.ok()) << parsed.status();
    return *parsed;
  };
  EXPECT_EQ(GgufProblem(olmoe(nlohmann::json::object())), "");
  EXPECT_EQ(GgufProblem(olmoe({{"clip_qkv", 8.0}})),
            "gguf cannot hold OlmoeForCausalLM: llama.cpp's olmoe does not clamp q, k and v "
            "(clip_qkv); export hf, hf_quark or compressed_tensors");
  EXPECT_NE(GgufProblem(olmoe({{"attention_bias", true}})).find("no attention biases"),
            std::string::npos);
  EXPECT_NE(GgufProblem(olmoe({{"tie_word_embeddings", true}})).find("its own output head"),
            std::string::npos);
  EXPECT_NE(GgufProblem(olmoe({{"num_key_value_heads", 2}}))
                .find("num_key_value_heads == num_attention_heads"),
            std::string::npos);
  EXPECT_NE(GgufProblem(olmoe({{"norm_topk_prob", true}})).find("olmoe does not renormalise"),
            std::string::npos);
  // The Hugging Face formats take every OLMoE config.
  for (ExportFormat f :
       {ExportFormat::kHfFakeQuantized, ExportFormat::kHfQuark, ExportFormat::kCompressedTensors}) {
    EXPECT_TRUE(
        CheckArchitectureSupport(f, olmoe({{"clip_qkv", 8.0}, {"attention_bias", true}})).ok());
  }
  EXPECT_FALSE(
      CheckArchitectureSupport(ExportFormat::kOnnxQdq, olmoe(nlohmann::json::object())).ok());
}

}  // namespace
}  // namespace quantd::exporter
