#include "worker/models/layer_shapes.h"

#include "gtest/gtest.h"

namespace quantd::models {
namespace {

ModelConfig Stories() {
  ModelConfig c;
  c.architecture = "LlamaForCausalLM";
  c.hidden_size = 64;
  c.intermediate_size = 172;
  c.num_hidden_layers = 5;
  c.num_attention_heads = 8;
  c.num_key_value_heads = 4;
  c.head_dim = 8;
  c.vocab_size = 512;
  c.tie_word_embeddings = true;
  return c;
}

TEST(LayerShapesTest, LlamaLinearsGroupsAndNorms) {
  const auto layers = ListLinearLayers(Stories());
  ASSERT_EQ(layers.size(), 5u * 7 + 1);
  EXPECT_EQ(layers[0].name, "model.layers.0.self_attn.q_proj");
  EXPECT_EQ(layers[0].out_features, 64);
  EXPECT_EQ(layers[1].name, "model.layers.0.self_attn.k_proj");
  EXPECT_EQ(layers[1].out_features, 32);  // 4 kv heads x 8
  EXPECT_EQ(layers[1].in_features, 64);
  EXPECT_EQ(layers[6].name, "model.layers.0.mlp.down_proj");
  EXPECT_EQ(layers[6].in_features, 172);
  EXPECT_EQ(layers[6].block, 0);
  EXPECT_EQ(layers[34].name, "model.layers.4.mlp.down_proj");
  EXPECT_EQ(layers.back().name, "lm_head");
  EXPECT_EQ(layers.back().out_features, 512);
  EXPECT_EQ(layers.back().block, -1);
  for (const auto& l : layers) {
    EXPECT_EQ(l.type, "Linear");
    EXPECT_FALSE(l.has_bias);
  }

  const BlockLayout b = GetBlockLayout(Stories(), 2);
  EXPECT_EQ(b.prefix, "model.layers.2.");
  ASSERT_EQ(b.groups.size(), 4u);
  EXPECT_EQ(b.groups[0].linears, (std::vector<std::string>{"model.layers.2.self_attn.q_proj",
                                                           "model.layers.2.self_attn.k_proj",
                                                           "model.layers.2.self_attn.v_proj"}));
  EXPECT_EQ(b.groups[0].prev_op, "model.layers.2.input_layernorm");
  EXPECT_EQ(b.groups[1].prev_op, "");  // GQA: v_proj cannot absorb o_proj scales
  EXPECT_EQ(b.groups[2].prev_op, "model.layers.2.post_attention_layernorm");
  EXPECT_EQ(b.groups[3].linears, (std::vector<std::string>{"model.layers.2.mlp.down_proj"}));
  EXPECT_EQ(b.groups[3].prev_op, "model.layers.2.mlp.up_proj");
  ASSERT_EQ(b.norms.size(), 2u);
  EXPECT_EQ(b.norms[1].name, "model.layers.2.post_attention_layernorm");
  EXPECT_EQ(b.norms[1].kind, NormKind::kRmsNorm);

  ModelConfig mha = Stories();
  mha.num_key_value_heads = 8;
  EXPECT_EQ(GetBlockLayout(mha, 0).groups[1].prev_op, "model.layers.0.self_attn.v_proj");

  const auto emb = ListEmbeddings(Stories());
  ASSERT_EQ(emb.size(), 1u);
  EXPECT_EQ(emb[0].name, "model.embed_tokens");
}

// OLMoE: q_norm / k_norm as wide as the q and k projections; with clip_qkv
// v_proj takes no o_proj scale (the clamp sits between them).
TEST(LayerShapesTest, OlmoeWholeWidthQkNormsAndClipQkv) {
  const std::string json = R"({"architectures": ["OlmoeForCausalLM"], "hidden_size": 64,
    "intermediate_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
    "num_key_value_heads": 4, "vocab_size": 50, "num_experts": 4, "num_experts_per_tok": 2,
    "clip_qkv": null})";
  auto c = ParseModelConfig(json, "olmoe");
  ASSERT_TRUE(c.ok()) << c.status();
  const BlockLayout b = GetBlockLayout(*c, 1);
  ASSERT_EQ(b.norms.size(), 4u);
  EXPECT_EQ(b.norms[2].name, "model.layers.1.self_attn.q_norm");
  EXPECT_EQ(b.norms[2].dim, 64);
  EXPECT_EQ(b.norms[3].name, "model.layers.1.self_attn.k_norm");
  EXPECT_EQ(b.norms[3].dim, 64);
  EXPECT_EQ(b.groups[1].prev_op, "model.layers.1.self_attn.v_proj");
  // Experts of intermediate_size: the router, then gate, up, down of each.
  const auto layers = ListLinearLayers(*c);
  EXPECT_EQ(layers.size(), 2u * (4 + 1 + 4 * 3) + 1);

  std::string clipped = json;
  clipped.replace(clipped.find("\"clip_qkv\": null"), 16, "\"clip_qkv\": 8.0");
  auto cc = ParseModelConfig(clipped, "olmoe");
  ASSERT_TRUE(cc.ok()) << cc.status();
  EXPECT_EQ(GetBlockLayout(*cc, 1).groups[1].prev_op, "");
}

TEST(LayerShapesTest, Gpt2PresentsConv1DAsTransposedLinears) {
  auto c = ParseModelConfig(R"({"architectures": ["GPT2LMHeadModel"], "n_embd": 768,
    "n_layer": 2, "n_head": 12, "vocab_size": 50257})",
                            "gpt2");
  ASSERT_TRUE(c.ok());
  const auto layers = ListLinearLayers(*c);
  ASSERT_EQ(layers.size(), 2u * 4 + 1);
  EXPECT_EQ(layers[0].name, "transformer.h.0.attn.c_attn");
  EXPECT_EQ(layers[0].out_features, 2304);
  EXPECT_EQ(layers[0].in_features, 768);
  EXPECT_TRUE(layers[0].transposed_in_checkpoint);
  EXPECT_TRUE(layers[0].has_bias);
  EXPECT_EQ(layers[2].name, "transformer.h.0.mlp.c_fc");
  EXPECT_EQ(layers[2].out_features, 3072);
  EXPECT_FALSE(layers.back().transposed_in_checkpoint);
  const ModelLayout m = GetModelLayout(*c);
  EXPECT_EQ(m.position_embedding.name, "transformer.wpe");
  EXPECT_EQ(m.position_embedding.num_embeddings, 1024);
  EXPECT_EQ(m.final_norm.kind, NormKind::kLayerNorm);
  EXPECT_EQ(m.alias_prefix, "");
  EXPECT_EQ(m.canonical_prefix, "transformer.");
}

TEST(LayerShapesTest, OptWithProjections) {
  auto layers = ListLinearLayersFromConfigJson(R"({"architectures": ["OPTForCausalLM"],
    "hidden_size": 1024, "ffn_dim": 4096, "num_hidden_layers": 1, "num_attention_heads": 16,
    "vocab_size": 50272, "word_embed_proj_dim": 512, "do_layer_norm_before": false})",
                                               "opt-350m");
  ASSERT_TRUE(layers.ok()) << layers.status();
  ASSERT_EQ(layers->size(), 6u + 3);
  EXPECT_EQ((*layers)[3].name, "model.decoder.layers.0.self_attn.out_proj");
  EXPECT_EQ((*layers)[5].name, "model.decoder.layers.0.fc2");
  EXPECT_EQ((*layers)[5].in_features, 4096);
  EXPECT_EQ((*layers)[6].name, "model.decoder.project_in");
  EXPECT_EQ((*layers)[6].out_features, 1024);
  EXPECT_EQ((*layers)[6].in_features, 512);
  EXPECT_EQ((*layers)[7].name, "model.decoder.project_out");
  EXPECT_EQ((*layers)[8].name, "lm_head");
  EXPECT_EQ((*layers)[8].in_features, 512);

  auto c = ParseModelConfig(R"({"architectures": ["OPTForCausalLM"], "hidden_size": 1024,
    "ffn_dim": 4096, "num_hidden_layers": 1, "num_attention_heads": 16, "vocab_size": 50272,
    "do_layer_norm_before": false})",
                            "opt");
  ASSERT_TRUE(c.ok());
  const BlockLayout b = GetBlockLayout(*c, 0);
  EXPECT_EQ(b.groups[0].prev_op, "");  // post-LN: the norm does not feed q/k/v
  EXPECT_EQ(b.groups[3].prev_op, "model.decoder.layers.0.fc1");
  EXPECT_EQ(GetModelLayout(*c).final_norm.name, "");
  EXPECT_EQ(GetModelLayout(*c).position_offset, 2);
  EXPECT_EQ(GetModelLayout(*c).position_embedding.num_embeddings, 2050);

  auto bad = ListLinearLayersFromConfigJson(R"({"architectures": ["BertModel"]})", "bert");
  EXPECT_EQ(bad.status().code(), StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace quantd::models
