#include "worker/io/gguf/hf_mapping.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace quantd::gguf {
namespace {

using ::testing::HasSubstr;

TEST(HfMappingTest, LlamaNamesBothWays) {
  const std::pair<const char*, const char*> pairs[] = {
      {"token_embd.weight", "model.embed_tokens.weight"},
      {"output_norm.weight", "model.norm.weight"},
      {"output.weight", "lm_head.weight"},
      {"blk.0.attn_norm.weight", "model.layers.0.input_layernorm.weight"},
      {"blk.12.attn_q.weight", "model.layers.12.self_attn.q_proj.weight"},
      {"blk.3.attn_k.bias", "model.layers.3.self_attn.k_proj.bias"},
      {"blk.3.attn_v.weight", "model.layers.3.self_attn.v_proj.weight"},
      {"blk.3.attn_output.weight", "model.layers.3.self_attn.o_proj.weight"},
      {"blk.4.ffn_norm.weight", "model.layers.4.post_attention_layernorm.weight"},
      {"blk.4.ffn_gate.weight", "model.layers.4.mlp.gate_proj.weight"},
      {"blk.4.ffn_up.weight", "model.layers.4.mlp.up_proj.weight"},
      {"blk.4.ffn_down.weight", "model.layers.4.mlp.down_proj.weight"},
  };
  for (const auto& [gguf, hf] : pairs) {
    auto to_hf = GgufToHfTensorName("llama", gguf);
    ASSERT_TRUE(to_hf.has_value()) << gguf;
    EXPECT_EQ(to_hf->name, hf);
    auto back = HfToGgufTensorName("llama", hf);
    ASSERT_TRUE(back.has_value()) << hf;
    EXPECT_EQ(back->name, gguf);
    EXPECT_EQ(back->change, to_hf->change);
  }
  EXPECT_EQ(GgufToHfTensorName("llama", "blk.1.attn_q.weight")->change, LayoutChange::kRopeQuery);
  EXPECT_EQ(GgufToHfTensorName("llama", "blk.1.attn_k.bias")->change, LayoutChange::kRopeKey);
  EXPECT_EQ(GgufToHfTensorName("qwen2", "blk.1.attn_q.weight")->change, LayoutChange::kNone);
  EXPECT_FALSE(GgufToHfTensorName("llama", "rope_freqs.weight").has_value());
  EXPECT_FALSE(GgufToHfTensorName("llama", "blk.x.attn_q.weight").has_value());
  EXPECT_FALSE(GgufToHfTensorName("llama", "blk.1.attn_q").has_value());
  EXPECT_FALSE(GgufToHfTensorName("mamba", "token_embd.weight").has_value());
  EXPECT_FALSE(HfToGgufTensorName("llama", "model.layers.0.self_attn.rotary_emb.inv_freq"));
}

TEST(HfMappingTest, GemmaNamesAndNormsStoredAsOnePlusW) {
  auto post = HfToGgufTensorName("gemma2", "model.layers.1.post_feedforward_layernorm.weight");
  ASSERT_TRUE(post.has_value());
  EXPECT_EQ(post->name, "blk.1.post_ffw_norm.weight");
  EXPECT_EQ(post->change, LayoutChange::kPlusOne);
  EXPECT_EQ(HfToGgufTensorName("gemma2", "model.layers.0.pre_feedforward_layernorm.weight")->name,
            "blk.0.ffn_norm.weight");
  EXPECT_EQ(HfToGgufTensorName("gemma2", "model.norm.weight")->change, LayoutChange::kPlusOne);
  // Rotate-half rows stay as they are; the output is the embedding.
  EXPECT_EQ(HfToGgufTensorName("gemma2", "model.layers.0.self_attn.q_proj.weight")->change,
            LayoutChange::kNone);
  EXPECT_FALSE(HfToGgufTensorName("gemma2", "lm_head.weight").has_value());
  EXPECT_EQ(HfToGgufTensorName("gemma3", "lm_head.weight")->name, "output.weight");
  auto q_norm = GgufToHfTensorName("gemma3", "blk.2.attn_q_norm.weight");
  ASSERT_TRUE(q_norm.has_value());
  EXPECT_EQ(q_norm->name, "model.layers.2.self_attn.q_norm.weight");
  EXPECT_EQ(q_norm->change, LayoutChange::kPlusOne);
  EXPECT_FALSE(HfToGgufTensorName("gemma2", "model.layers.0.self_attn.q_norm.weight").has_value());
}

// Each expert's weight is its slice of llama.cpp's stacked tensor; the
// router and Qwen2-MoE's shared expert map one to one.
TEST(HfMappingTest, ExpertsGoToTheirSliceOfTheStackedTensors) {
  struct Case {
    const char* arch;
    const char* hf;
    const char* gguf;
    int64_t expert;
  };
  const Case cases[] = {
      {"llama", "model.layers.1.block_sparse_moe.gate.weight", "blk.1.ffn_gate_inp.weight", -1},
      {"llama", "model.layers.1.block_sparse_moe.experts.7.w1.weight", "blk.1.ffn_gate_exps.weight",
       7},
      {"llama", "model.layers.1.block_sparse_moe.experts.0.w3.weight", "blk.1.ffn_up_exps.weight",
       0},
      {"llama", "model.layers.1.block_sparse_moe.experts.2.w2.weight", "blk.1.ffn_down_exps.weight",
       2},
      {"qwen3moe", "model.layers.0.mlp.gate.weight", "blk.0.ffn_gate_inp.weight", -1},
      {"qwen3moe", "model.layers.0.mlp.experts.127.down_proj.weight", "blk.0.ffn_down_exps.weight",
       127},
      {"qwen2moe", "model.layers.3.mlp.shared_expert.up_proj.weight", "blk.3.ffn_up_shexp.weight",
       -1},
      {"olmoe", "model.layers.2.mlp.gate.weight", "blk.2.ffn_gate_inp.weight", -1},
      {"olmoe", "model.layers.2.mlp.experts.63.gate_proj.weight", "blk.2.ffn_gate_exps.weight", 63},
      {"olmoe", "model.layers.2.mlp.experts.5.up_proj.weight", "blk.2.ffn_up_exps.weight", 5},
      {"olmoe", "model.layers.2.self_attn.q_norm.weight", "blk.2.attn_q_norm.weight", -1},
      {"olmoe", "model.layers.2.self_attn.k_norm.weight", "blk.2.attn_k_norm.weight", -1},
  };
  for (const Case& c : cases) {
    auto m = HfToGgufTensorName(c.arch, c.hf);
    ASSERT_TRUE(m.has_value()) << c.hf;
    EXPECT_EQ(m->name, c.gguf);
    EXPECT_EQ(m->expert, c.expert) << c.hf;
  }
  auto gate = HfToGgufTensorName("qwen2moe", "model.layers.3.mlp.shared_expert_gate.weight");
  ASSERT_TRUE(gate.has_value());
  EXPECT_EQ(gate->name, "blk.3.ffn_gate_inp_shexp.weight");
  EXPECT_TRUE(gate->squeeze);
  // No expert bias, no unknown role, and a dense model has no experts.
  EXPECT_FALSE(HfToGgufTensorName("qwen3moe", "model.layers.0.mlp.experts.1.down_proj.bias"));
  EXPECT_FALSE(HfToGgufTensorName("qwen3moe", "model.layers.0.mlp.experts.1.w9.weight"));
  EXPECT_FALSE(HfToGgufTensorName("qwen3", "model.layers.0.mlp.experts.1.down_proj.weight"));
  // OLMoE's rows keep Hugging Face's rotate-half order (llama.cpp's NEOX
  // rope), and its whole-width q/k norms read back unchanged.
  EXPECT_TRUE(IsMappedArchitecture("olmoe"));
  EXPECT_EQ(HfToGgufTensorName("olmoe", "model.layers.0.self_attn.q_proj.weight")->change,
            LayoutChange::kNone);
  auto k_norm = GgufToHfTensorName("olmoe", "blk.1.attn_k_norm.weight");
  ASSERT_TRUE(k_norm.has_value());
  EXPECT_EQ(k_norm->name, "model.layers.1.self_attn.k_norm.weight");
  EXPECT_EQ(k_norm->change, LayoutChange::kNone);
  EXPECT_EQ(GgufToHfTensorName("olmoe", "blk.1.ffn_gate_inp.weight")->name,
            "model.layers.1.mlp.gate.weight");
  EXPECT_EQ(GgufToHfTensorName("olmoe", "output.weight")->name, "lm_head.weight");
}

TEST(HfMappingTest, LlamaCppSlidingPeriods) {
  // Gemma 2 (every second layer from the first) and Gemma 3 (five of six).
  EXPECT_EQ(LlamaCppSlidingPeriod({true, false, true, false}), 2);
  EXPECT_EQ(LlamaCppSlidingPeriod({true, true, true, true, true, false, true}), 6);
  EXPECT_EQ(LlamaCppSlidingPeriod({true, true, true}), 0);     // all slide
  EXPECT_EQ(LlamaCppSlidingPeriod({false, false, false}), 1);  // none
  EXPECT_EQ(LlamaCppSlidingPeriod({false, true}), std::nullopt);
  EXPECT_EQ(LlamaCppSlidingPeriod({true, false, false}), std::nullopt);
}

TEST(HfMappingTest, Gpt2NamesAndConv1DTransposes) {
  auto qkv = GgufToHfTensorName("gpt2", "blk.2.attn_qkv.weight");
  ASSERT_TRUE(qkv.has_value());
  EXPECT_EQ(qkv->name, "transformer.h.2.attn.c_attn.weight");
  EXPECT_EQ(qkv->change, LayoutChange::kTranspose);
  auto qkv_bias = GgufToHfTensorName("gpt2", "blk.2.attn_qkv.bias");
  EXPECT_EQ(qkv_bias->change, LayoutChange::kNone);
  EXPECT_EQ(HfToGgufTensorName("gpt2", "transformer.wpe.weight")->name, "position_embd.weight");
  EXPECT_EQ(HfToGgufTensorName("gpt2", "transformer.h.0.mlp.c_proj.weight")->name,
            "blk.0.ffn_down.weight");
  EXPECT_EQ(HfToGgufTensorName("gpt2", "transformer.h.0.ln_2.bias")->name, "blk.0.ffn_norm.bias");
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The config built from the GGUF metadata agrees with the checkpoint's own
// config.json on every hyperparameter the model needs.
TEST(HfMappingTest, Stories260KConfigMatchesConfigJson) {
  auto f = ReadGgufFile("models/stories260K/stories260K-f32.gguf");
  ASSERT_TRUE(f.ok()) << f.status();
  auto text = BuildHfConfigJson(*f);
  ASSERT_TRUE(text.ok()) << text.status();
  auto built = nlohmann::json::parse(*text);
  auto expected = nlohmann::json::parse(ReadFile("models/stories260K/config.json"));
  for (const char* key :
       {"architectures", "model_type", "hidden_size", "intermediate_size", "num_hidden_layers",
        "num_attention_heads", "num_key_value_heads", "vocab_size", "rms_norm_eps", "rope_theta",
        "hidden_act", "bos_token_id", "eos_token_id"}) {
    EXPECT_EQ(built[key], expected[key]) << key;
  }
  EXPECT_EQ(built["max_position_embeddings"], 2048);  // the GGUF's context_length
  // The official GGUF stores output.weight separately, so it is not tied.
  EXPECT_EQ(built["tie_word_embeddings"], false);
  EXPECT_FALSE(built.contains("head_dim"));
}

TEST(HfMappingTest, ConfigErrorsNameTheKey) {
  GgufFile f;
  f.path = "m.gguf";
  EXPECT_THAT(BuildHfConfigJson(f).status().message(), HasSubstr("general.architecture"));
  f.metadata.emplace_back("general.architecture", GgufValue::String("mamba"));
  EXPECT_EQ(BuildHfConfigJson(f).status().code(), StatusCode::kUnimplemented);
  f.metadata[0].second = GgufValue::String("llama");
  auto missing = BuildHfConfigJson(f);
  EXPECT_EQ(missing.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(missing.status().message(), HasSubstr("llama.embedding_length"));
}

TEST(HfMappingTest, Gpt2AndScaledLlamaConfigs) {
  GgufFile g;
  g.metadata = {{"general.architecture", GgufValue::String("gpt2")},
                {"gpt2.embedding_length", GgufValue::Uint32(48)},
                {"gpt2.feed_forward_length", GgufValue::Uint32(192)},
                {"gpt2.block_count", GgufValue::Uint32(2)},
                {"gpt2.attention.head_count", GgufValue::Uint32(4)},
                {"gpt2.context_length", GgufValue::Uint32(64)},
                {"gpt2.attention.layer_norm_epsilon", GgufValue::Float32(1e-5f)},
                {"tokenizer.ggml.tokens", GgufValue::StringArray({"a", "b", "c"})}};
  auto cfg = nlohmann::json::parse(*BuildHfConfigJson(g));
  EXPECT_EQ(cfg["architectures"][0], "GPT2LMHeadModel");
  EXPECT_EQ(cfg["n_embd"], 48);
  EXPECT_EQ(cfg["n_inner"], 192);
  EXPECT_EQ(cfg["n_positions"], 64);
  EXPECT_EQ(cfg["vocab_size"], 3);
  EXPECT_EQ(cfg["layer_norm_epsilon"], 1e-5);
  EXPECT_EQ(cfg["tie_word_embeddings"], true);

  GgufFile l;
  l.metadata = {{"general.architecture", GgufValue::String("llama")},
                {"llama.embedding_length", GgufValue::Uint32(64)},
                {"llama.feed_forward_length", GgufValue::Uint32(128)},
                {"llama.block_count", GgufValue::Uint32(1)},
                {"llama.attention.head_count", GgufValue::Uint32(4)},
                {"llama.attention.key_length", GgufValue::Uint32(32)},
                {"llama.rope.freq_base", GgufValue::Float32(500000.0f)},
                {"llama.rope.scaling.type", GgufValue::String("linear")},
                {"llama.rope.scaling.factor", GgufValue::Float32(4.0f)},
                {"llama.vocab_size", GgufValue::Uint32(100)}};
  auto lc = nlohmann::json::parse(*BuildHfConfigJson(l));
  EXPECT_EQ(lc["num_key_value_heads"], 4);
  EXPECT_EQ(lc["head_dim"], 32);
  EXPECT_EQ(lc["rope_theta"], 500000.0);
  EXPECT_EQ(lc["rope_scaling"]["type"], "linear");
  EXPECT_EQ(lc["rope_scaling"]["factor"], 4.0);
  EXPECT_EQ(lc["vocab_size"], 100);

  // YaRN as convert_hf_to_gguf.py writes it (Qwen's long-context setting).
  GgufFile y = l;
  for (auto& [key, value] : y.metadata) {
    if (key == "llama.rope.scaling.type") value = GgufValue::String("yarn");
  }
  y.metadata.push_back({"llama.rope.scaling.original_context_length", GgufValue::Uint32(32768)});
  y.metadata.push_back({"llama.rope.scaling.yarn_beta_fast", GgufValue::Float32(16.0f)});
  auto yc = nlohmann::json::parse(*BuildHfConfigJson(y));
  EXPECT_EQ(yc["rope_scaling"]["rope_type"], "yarn");
  EXPECT_EQ(yc["rope_scaling"]["factor"], 4.0);
  EXPECT_EQ(yc["rope_scaling"]["original_max_position_embeddings"], 32768);
  EXPECT_EQ(yc["rope_scaling"]["beta_fast"], 16.0);
  EXPECT_EQ(yc["rope_scaling"]["beta_slow"], 1.0);
  // An attention factor llama.cpp multiplies in has no one config.json key.
  y.metadata.push_back({"llama.rope.scaling.yarn_log_multiplier", GgufValue::Float32(0.1f)});
  auto refused = BuildHfConfigJson(y);
  EXPECT_EQ(refused.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(refused.status().message().find("yarn_log_multiplier"), std::string::npos);
}

}  // namespace
}  // namespace quantd::gguf
