#include "worker/models/model_config.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace quantd::models {
namespace {

using ::testing::HasSubstr;

TEST(ModelConfigTest, LoadsStories260K) {
  auto c = LoadModelConfig("models/stories260K");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->architecture, "LlamaForCausalLM");
  EXPECT_EQ(c->family, ArchitectureFamily::kLlama);
  EXPECT_EQ(c->hidden_size, 64);
  EXPECT_EQ(c->intermediate_size, 172);
  EXPECT_EQ(c->num_hidden_layers, 5);
  EXPECT_EQ(c->num_attention_heads, 8);
  EXPECT_EQ(c->num_key_value_heads, 4);
  EXPECT_EQ(c->head_dim, 8);
  EXPECT_EQ(c->vocab_size, 512);
  EXPECT_DOUBLE_EQ(c->norm_eps, 1e-5);
  EXPECT_DOUBLE_EQ(c->rope_theta, 10000.0);
  EXPECT_TRUE(c->tie_word_embeddings);
  EXPECT_FALSE(c->qkv_bias);
  EXPECT_EQ(c->bos_token_id, 1);
  EXPECT_EQ(c->eos_token_id, 2);
  EXPECT_FALSE(c->rope_scaling.has_value());
}

TEST(ModelConfigTest, Llama3RopeScalingAndEosList) {
  auto c = ParseModelConfig(R"({
    "architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "intermediate_size": 14336,
    "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
    "vocab_size": 128256, "rms_norm_eps": 1e-5, "rope_theta": 500000.0,
    "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009]})",
                            "llama3/config.json");
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE(c->rope_scaling.has_value());
  EXPECT_EQ(c->rope_scaling->type, "llama3");
  EXPECT_DOUBLE_EQ(c->rope_scaling->factor, 8.0);
  EXPECT_EQ(c->rope_scaling->original_max_position_embeddings, 8192);
  EXPECT_EQ(c->head_dim, 128);
  EXPECT_FALSE(c->tie_word_embeddings);  // LlamaConfig's default
  EXPECT_EQ(c->eos_token_id, 128001);
}

TEST(ModelConfigTest, Qwen2HasQkvBiasAndMistralSlidingWindow) {
  auto q = ParseModelConfig(R"({"architectures": ["Qwen2ForCausalLM"], "hidden_size": 896,
    "intermediate_size": 4864, "num_hidden_layers": 24, "num_attention_heads": 14,
    "num_key_value_heads": 2, "vocab_size": 151936, "rope_theta": 1000000.0,
    "sliding_window": 32768, "use_sliding_window": false, "tie_word_embeddings": true})",
                            "qwen2");
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_TRUE(q->qkv_bias);
  EXPECT_FALSE(q->o_bias);
  EXPECT_FALSE(q->sliding_window.has_value());
  EXPECT_EQ(q->head_dim, 64);

  auto m = ParseModelConfig(R"({"architectures": ["MistralForCausalLM"], "hidden_size": 4096,
    "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
    "num_key_value_heads": 8, "vocab_size": 32000, "sliding_window": 4096, "head_dim": 128})",
                            "mistral");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->sliding_window, 4096);
  EXPECT_FALSE(m->qkv_bias);
}

TEST(ModelConfigTest, Gpt2AndOptKeysMapOntoTheCommonFields) {
  auto g = ParseModelConfig(R"({"architectures": ["GPT2LMHeadModel"], "n_embd": 768,
    "n_layer": 12, "n_head": 12, "n_positions": 1024, "n_inner": null, "vocab_size": 50257,
    "activation_function": "gelu_new", "layer_norm_epsilon": 1e-05})",
                            "gpt2");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->family, ArchitectureFamily::kGpt2);
  EXPECT_EQ(g->intermediate_size, 3072);
  EXPECT_EQ(g->max_position_embeddings, 1024);
  EXPECT_EQ(g->hidden_act, "gelu_new");
  EXPECT_TRUE(g->tie_word_embeddings);

  auto o = ParseModelConfig(R"({"architectures": ["OPTForCausalLM"], "hidden_size": 1024,
    "ffn_dim": 4096, "num_hidden_layers": 24, "num_attention_heads": 16,
    "max_position_embeddings": 2048, "vocab_size": 50272, "word_embed_proj_dim": 512,
    "do_layer_norm_before": false, "activation_function": "relu"})",
                            "opt-350m");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->family, ArchitectureFamily::kOpt);
  EXPECT_EQ(o->intermediate_size, 4096);
  EXPECT_EQ(o->word_embed_proj_dim, 512);
  EXPECT_FALSE(o->do_layer_norm_before);
  EXPECT_FALSE(o->final_layer_norm);
}

// Qwen3-0.6B's config.json keys (head_dim 128 x 16 heads != hidden 1024).
TEST(ModelConfigTest, Qwen3HasQkNormsAndAttentionBiasOnAllFourProjections) {
  const std::string qwen3 = R"({"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
    "hidden_size": 1024, "intermediate_size": 3072, "num_hidden_layers": 28,
    "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936,
    "rms_norm_eps": 1e-06, "rope_theta": 1000000, "attention_bias": false,
    "use_sliding_window": false, "sliding_window": null, "max_window_layers": 28,
    "tie_word_embeddings": true})";
  auto c = ParseModelConfig(qwen3, "qwen3/config.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->qk_norm);
  EXPECT_EQ(c->head_dim, 128);
  EXPECT_FALSE(c->qkv_bias);
  EXPECT_FALSE(c->o_bias);
  EXPECT_FALSE(c->sliding_window.has_value());
  std::string biased = qwen3;
  biased.replace(biased.find("\"attention_bias\": false"), 23, "\"attention_bias\": true ");
  auto b = ParseModelConfig(biased, "qwen3/config.json");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_TRUE(b->qkv_bias && b->o_bias);
  // use_sliding_window: layers from max_window_layers on slide, unless the
  // window is null or layer_types says otherwise.
  std::string sliding = qwen3;
  sliding.replace(sliding.find("\"use_sliding_window\": false"), 27,
                  "\"use_sliding_window\": true ");
  auto null_window = ParseModelConfig(sliding, "qwen3/config.json");
  ASSERT_TRUE(null_window.ok()) << null_window.status();
  EXPECT_EQ(SlidingWindowAt(*null_window, 27), 0);
  sliding.replace(sliding.find("\"sliding_window\": null"), 22, "\"sliding_window\": 512 ");
  sliding.replace(sliding.find("\"max_window_layers\": 28"), 23, "\"max_window_layers\": 20");
  auto s = ParseModelConfig(sliding, "qwen3/config.json");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(SlidingWindowAt(*s, 19), 0);
  EXPECT_EQ(SlidingWindowAt(*s, 20), 512);
  EXPECT_EQ(SlidingWindowAt(*s, 27), 512);
  std::string typed = sliding;
  typed.replace(typed.find("\"tie_word_embeddings\""), 0,
                "\"layer_types\": [\"full_attention\"], ");
  auto bad_types = ParseModelConfig(typed, "qwen3/config.json");
  EXPECT_EQ(bad_types.status().message(),
            "qwen3/config.json: \"layer_types\" must list one attention type per layer (28)");
  // Qwen2 keeps its q/k/v biases and has no q/k norms.
  auto q2 = ParseModelConfig(R"({"architectures": ["Qwen2ForCausalLM"], "hidden_size": 64,
    "intermediate_size": 128, "num_hidden_layers": 1, "num_attention_heads": 4,
    "vocab_size": 10})",
                             "qwen2/config.json");
  ASSERT_TRUE(q2.ok());
  EXPECT_TRUE(q2->qkv_bias);
  EXPECT_FALSE(q2->o_bias || q2->qk_norm);
}

// Qwen3-30B-A3B's keys, Qwen's dense layers, Mixtral's defaults, and the
// bounds a hostile config meets.
TEST(ModelConfigTest, MixtureOfExpertsKeysAndBounds) {
  const std::string qwen3_moe = R"({"architectures": ["Qwen3MoeForCausalLM"],
    "hidden_size": 2048, "intermediate_size": 6144, "num_hidden_layers": 48,
    "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128, "vocab_size": 151936,
    "num_experts": 128, "num_experts_per_tok": 8, "moe_intermediate_size": 768,
    "norm_topk_prob": true, "decoder_sparse_step": 1, "mlp_only_layers": []})";
  auto c = ParseModelConfig(qwen3_moe, "q/config.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->num_experts, 128);
  EXPECT_EQ(c->num_experts_per_tok, 8);
  EXPECT_EQ(c->moe_intermediate_size, 768);
  EXPECT_TRUE(c->norm_topk_prob && c->qk_norm);
  EXPECT_TRUE(IsMoeLayer(*c, 0) && IsMoeLayer(*c, 47));
  EXPECT_FALSE(IsMoeLayer(*c, 48));

  std::string dense = qwen3_moe;
  dense.replace(dense.find("\"decoder_sparse_step\": 1, \"mlp_only_layers\": []"), 47,
                "\"decoder_sparse_step\": 2, \"mlp_only_layers\": [5]");
  auto d = ParseModelConfig(dense, "q/config.json");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_FALSE(IsMoeLayer(*d, 0));  // (0 + 1) % 2 != 0
  EXPECT_FALSE(IsMoeLayer(*d, 5));  // mlp_only_layers
  EXPECT_TRUE(IsMoeLayer(*d, 3));

  auto mixtral = ParseModelConfig(R"({"architectures": ["MixtralForCausalLM"],
    "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
    "num_attention_heads": 4, "vocab_size": 10})",
                                  "m/config.json");
  ASSERT_TRUE(mixtral.ok()) << mixtral.status();
  EXPECT_EQ(mixtral->num_experts, 8);
  EXPECT_EQ(mixtral->num_experts_per_tok, 2);
  EXPECT_EQ(mixtral->moe_intermediate_size, 128);
  EXPECT_TRUE(mixtral->norm_topk_prob);

  std::string too_many = qwen3_moe;
  too_many.replace(too_many.find("\"num_experts_per_tok\": 8"), 24, "\"num_experts_per_tok\": 200");
  EXPECT_EQ(ParseModelConfig(too_many, "q/config.json").status().message(),
            "q/config.json: \"num_experts_per_tok\" (200) must not exceed the 128 experts");
  std::string huge = qwen3_moe;
  huge.replace(huge.find("\"num_experts\": 128"), 18, "\"num_experts\": 4096");
  EXPECT_EQ(ParseModelConfig(huge, "q/config.json").status().message(),
            "q/config.json: \"num_experts\" (4096) times num_hidden_layers (48) must not exceed "
            "32768");
  std::string bad_layer = qwen3_moe;
  bad_layer.replace(bad_layer.find("\"mlp_only_layers\": []"), 21, "\"mlp_only_layers\": [48]");
  EXPECT_EQ(ParseModelConfig(bad_layer, "q/config.json").status().message(),
            "q/config.json: \"mlp_only_layers\" entries must be layer indices in [0, 48), got 48");
}

// OLMoE-1B-7B-0924's keys (configuration_olmoe.py): q/k norms over the whole
// projections, head_dim from hidden_size, experts of intermediate_size,
// clip_qkv null; then clip_qkv set, the num_local_experts alias, and what is
// refused.
TEST(ModelConfigTest, OlmoeKeysClipQkvAndBounds) {
  const std::string olmoe = R"({"architectures": ["OlmoeForCausalLM"], "model_type": "olmoe",
    "hidden_size": 2048, "intermediate_size": 1024, "num_hidden_layers": 16,
    "num_attention_heads": 16, "num_key_value_heads": 16, "vocab_size": 50304,
    "max_position_embeddings": 4096, "rope_theta": 10000.0, "rope_scaling": null,
    "attention_bias": false, "clip_qkv": null, "num_experts": 64, "num_experts_per_tok": 8,
    "norm_topk_prob": false, "tie_word_embeddings": false})";
  auto c = ParseModelConfig(olmoe, "o/config.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->family, ArchitectureFamily::kLlama);
  EXPECT_EQ(c->head_dim, 128);
  EXPECT_TRUE(c->qk_norm && c->qk_norm_full_width);
  EXPECT_FALSE(c->qkv_bias || c->o_bias || c->mlp_bias || c->tie_word_embeddings);
  EXPECT_EQ(c->clip_qkv, 0);
  EXPECT_DOUBLE_EQ(c->norm_eps, 1e-5);  // OLMoE's default, not Llama's
  EXPECT_EQ(c->num_experts, 64);
  EXPECT_EQ(c->num_experts_per_tok, 8);
  EXPECT_EQ(c->moe_intermediate_size, 1024);
  EXPECT_FALSE(c->norm_topk_prob);
  EXPECT_EQ(c->shared_expert_intermediate_size, 0);
  EXPECT_TRUE(IsMoeLayer(*c, 0) && IsMoeLayer(*c, 15));

  auto with = [&](const std::string& from, const std::string& to) {
    std::string s = olmoe;
    s.replace(s.find(from), from.size(), to);
    return ParseModelConfig(s, "o/config.json");
  };
  auto clipped = with("\"clip_qkv\": null", "\"clip_qkv\": 8.0");
  ASSERT_TRUE(clipped.ok()) << clipped.status();
  EXPECT_EQ(clipped->clip_qkv, 8.0);
  // head_dim is always hidden_size / num_attention_heads in modeling_olmoe.py.
  auto head_dim = with("\"vocab_size\"", "\"head_dim\": 64, \"vocab_size\"");
  ASSERT_TRUE(head_dim.ok()) << head_dim.status();
  EXPECT_EQ(head_dim->head_dim, 128);
  auto alias = with("\"num_experts\": 64", "\"num_local_experts\": 32");
  ASSERT_TRUE(alias.ok()) << alias.status();
  EXPECT_EQ(alias->num_experts, 32);
  auto biased = with("\"attention_bias\": false", "\"attention_bias\": true");
  ASSERT_TRUE(biased.ok()) << biased.status();
  EXPECT_TRUE(biased->qkv_bias && biased->o_bias);

  EXPECT_EQ(with("\"clip_qkv\": null", "\"clip_qkv\": 0").status().message(),
            "o/config.json: \"clip_qkv\" must be a positive number or null");
  EXPECT_EQ(with("\"clip_qkv\": null", "\"clip_qkv\": -1.5").status().message(),
            "o/config.json: \"clip_qkv\" must be a positive number or null");
  EXPECT_EQ(with("\"clip_qkv\": null", "\"clip_qkv\": \"8\"").status().message(),
            "o/config.json: \"clip_qkv\" must be a number, got \"8\"");
  EXPECT_EQ(with("\"num_experts\": 64", "\"num_experts\": 0").status().message(),
            "o/config.json: \"num_experts\" must be in [1, 4096], got 0");
  EXPECT_EQ(with("\"num_experts\": 64", "\"num_local_experts\": 4096").status().message(),
            "o/config.json: \"num_local_experts\" (4096) times num_hidden_layers (16) must not "
            "exceed 32768");
  EXPECT_EQ(with("\"num_experts_per_tok\": 8", "\"num_experts_per_tok\": 65").status().message(),
            "o/config.json: \"num_experts_per_tok\" (65) must not exceed the 64 experts");
}

TEST(ModelConfigTest, UnsupportedArchitectureListsSupportedOnes) {
  auto c = ParseModelConfig(R"({"architectures": ["FalconForCausalLM"], "hidden_size": 64})",
                            "falcon/config.json");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(c.status().reason(), "UNSUPPORTED_ARCHITECTURE");
  EXPECT_EQ(c.status().message(),
            "falcon/config.json: architecture \"FalconForCausalLM\" is not supported; supported "
            "architectures: LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, "
            "Qwen3ForCausalLM, MixtralForCausalLM, Qwen2MoeForCausalLM, Qwen3MoeForCausalLM, "
            "Phi3ForCausalLM, Gemma2ForCausalLM, Gemma3ForCausalLM, GPT2LMHeadModel, "
            "OPTForCausalLM, OlmoeForCausalLM");
}

TEST(ModelConfigTest, BadFieldsAreNamed) {
  const std::string base = R"("architectures": ["LlamaForCausalLM"], "intermediate_size": 8,
    "num_hidden_layers": 1, "vocab_size": 10, )";
  struct Case {
    std::string json;
    StatusCode code;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"{" + base + R"("num_attention_heads": 2})", StatusCode::kFailedPrecondition,
       "c: \"hidden_size\" is required"},
      {"{" + base + R"("hidden_size": "64", "num_attention_heads": 2})",
       StatusCode::kFailedPrecondition, "\"hidden_size\" must be an integer, got \"64\""},
      {"{" + base + R"("hidden_size": -4, "num_attention_heads": 2})",
       StatusCode::kFailedPrecondition, "\"hidden_size\" must be in [1, 16777216], got -4"},
      {"{" + base + R"("hidden_size": 64, "num_attention_heads": 3})",
       StatusCode::kFailedPrecondition, "\"num_attention_heads\" (3) must divide hidden_size (64)"},
      {"{" + base + R"("hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 3})",
       StatusCode::kFailedPrecondition, "\"num_key_value_heads\" (3) must divide"},
      {"{" + base +
           R"("hidden_size": 64, "num_attention_heads": 4, "rope_scaling": {"type": "su", "factor": 4}})",
       StatusCode::kUnimplemented,
       "rope_scaling type \"su\" is not supported (supported: linear, llama3, yarn, dynamic, "
       "longrope)"},
      {"{" + base +
           R"("hidden_size": 64, "num_attention_heads": 4, "rope_scaling": {"type": "yarn"}})",
       StatusCode::kFailedPrecondition, "c: \"rope_scaling.factor\" is required"},
      {"{" + base +
           R"("hidden_size": 64, "num_attention_heads": 4, "rope_scaling": {"type": "dynamic", "factor": -2}})",
       StatusCode::kFailedPrecondition, "\"rope_scaling.factor\" must be a positive number"},
      {"{" + base + R"("hidden_size": 64, "num_attention_heads": 4, "rope_scaling":
           {"type": "longrope", "factor": 2, "short_factor": [1, 1], "long_factor": [1, 2]}})",
       StatusCode::kFailedPrecondition,
       "\"rope_scaling.short_factor\" must be a list of 8 numbers (the rotary dimensions / 2)"},
      {"{" + base + R"("hidden_size": 16, "num_attention_heads": 4, "rope_scaling":
           {"type": "longrope", "factor": 2, "short_factor": [1, 1], "long_factor": [1, 0]}})",
       StatusCode::kFailedPrecondition,
       "\"rope_scaling.long_factor\" must hold positive numbers, got 0"},
      {"{" + base + R"("hidden_size": 16, "num_attention_heads": 4, "rope_scaling":
           {"type": "longrope", "short_factor": [1, 1], "long_factor": [1, 2]}})",
       StatusCode::kFailedPrecondition, "needs factor or attention_factor for longrope"},
      {"{" + base + R"("hidden_size": 64, "num_attention_heads": 4, "hidden_act": "mish"})",
       StatusCode::kUnimplemented, "activation \"mish\" is not supported"},
      {"[1]", StatusCode::kFailedPrecondition, "not a JSON object"},
  };
  for (const auto& c : cases) {
    auto r = ParseModelConfig(c.json, "c");
    ASSERT_FALSE(r.ok()) << c.json;
    EXPECT_EQ(r.status().code(), c.code) << c.json;
    EXPECT_THAT(r.status().message(), HasSubstr(c.message)) << c.json;
  }
}

TEST(ModelConfigTest, HostileConfigJsonIsRefusedNotACrash) {
  // An unknown key nesting 300 000 levels: the worker crashed on it on
  // every attempt.
  const std::string deep = std::string(300000, '[') + std::string(300000, ']');
  auto c = ParseModelConfig(R"({"architectures": ["LlamaForCausalLM"], "x": )" + deep + "}",
                            "/m/config.json");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(c.status().reason(), "INVALID_MODEL_CONFIG");
  EXPECT_EQ(c.status().message(), "/m/config.json nests 300001 levels deep; at most 64");

  auto big = ParseModelConfig("{\"x\": \"" + std::string(4 << 20, 'a') + "\"}", "/m/config.json");
  EXPECT_EQ(big.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(big.status().message(), "/m/config.json is 4194313 bytes; at most 4194304");

  auto bad = ParseModelConfig("{\"x\": ", "/m/config.json");
  EXPECT_EQ(bad.status().message(), "/m/config.json: not valid JSON");
}

}  // namespace
}  // namespace quantd::models
