#include "worker/algo/awq_layout.h"

#include "gtest/gtest.h"
#include "worker/models/model_config.h"

namespace quantd::algo {
namespace {

models::BlockLayout Llama(int kv_heads) {
  const std::string json = R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "hidden_size": 64, "intermediate_size": 172, "num_hidden_layers": 2,
    "num_attention_heads": 8, "num_key_value_heads": )" +
                           std::to_string(kv_heads) + R"(, "vocab_size": 512})";
  auto config = models::ParseModelConfig(json, "config.json");
  EXPECT_TRUE(config.ok()) << config.status();
  return models::GetBlockLayout(*config, 1);
}

AwqScalingGroup Group(std::string prev_op, std::vector<std::string> layers,
                      std::string inspect = "") {
  AwqScalingGroup g;
  g.prev_op = std::move(prev_op);
  g.layers = std::move(layers);
  g.inp = g.layers[0];
  g.module2inspect = std::move(inspect);
  return g;
}

std::vector<std::string> Fields(const Status& s) {
  std::vector<std::string> out;
  for (const auto& v : s.violations()) out.push_back(v.field);
  return out;
}

TEST(AwqLayoutTest, WithoutScalingLayersEveryGroup) {
  auto chosen = AwqGroupSelection({}, Llama(8), "awq");
  ASSERT_TRUE(chosen.ok()) << chosen.status();
  EXPECT_EQ(*chosen, (std::vector<bool>{true, true, true, true}));
}

TEST(AwqLayoutTest, OnlyTheNamedGroups) {
  AwqOptions o;
  o.model_decoder_layers = "model.layers";
  // The MLP groups only, the second in another order than the model's.
  o.scaling_layers = {Group("post_attention_layernorm", {"mlp.up_proj", "mlp.gate_proj"}, "mlp"),
                      Group("mlp.up_proj", {"mlp.down_proj"})};
  auto chosen = AwqGroupSelection(o, Llama(8), "awq");
  ASSERT_TRUE(chosen.ok()) << chosen.status();
  EXPECT_EQ(*chosen, (std::vector<bool>{false, false, true, true}));
  // v_proj -> o_proj is foldable without grouped-query attention.
  o.scaling_layers = {Group("self_attn.v_proj", {"self_attn.o_proj"}, "self_attn.o_proj")};
  chosen = AwqGroupSelection(o, Llama(8), "awq");
  ASSERT_TRUE(chosen.ok()) << chosen.status();
  EXPECT_EQ(*chosen, (std::vector<bool>{false, true, false, false}));
}

TEST(AwqLayoutTest, EntriesThatCannotBeHonouredAreNamed) {
  AwqOptions o;
  o.model_decoder_layers = "transformer.h";
  o.scaling_layers = {
      // part of the q/k/v group
      Group("input_layernorm", {"self_attn.q_proj", "self_attn.k_proj"}, "self_attn"),
      // o_proj under grouped-query attention (4 kv heads of 8)
      Group("self_attn.v_proj", {"self_attn.o_proj"}),
      // the wrong previous op
      Group("input_layernorm", {"mlp.gate_proj", "mlp.up_proj"}, "mlp"),
      // an inspected module quantd does not compare
      Group("mlp.up_proj", {"mlp.down_proj"}, "mlp"),
  };
  auto chosen = AwqGroupSelection(o, Llama(4), "spec.quantization.quark_json.algo_config[0]");
  ASSERT_EQ(chosen.status().code(), StatusCode::kInvalidArgument);
  const std::string p = "spec.quantization.quark_json.algo_config[0].";
  EXPECT_EQ(Fields(chosen.status()),
            (std::vector<std::string>{p + "model_decoder_layers", p + "scaling_layers[0].layers",
                                      p + "scaling_layers[1].prev_op",
                                      p + "scaling_layers[2].prev_op",
                                      p + "scaling_layers[3].module2inspect"}));
  const Status s = chosen.status();
  const auto& v = s.violations();
  EXPECT_NE(v[0].description.find("'model.layers'"), std::string::npos) << v[0].description;
  EXPECT_NE(v[1].description.find("[self_attn.q_proj, self_attn.k_proj, self_attn.v_proj] after "
                                  "input_layernorm"),
            std::string::npos)
      << v[1].description;
  EXPECT_NE(v[2].description.find("grouped-query attention"), std::string::npos);
  EXPECT_NE(v[3].description.find("'post_attention_layernorm'"), std::string::npos);
  EXPECT_NE(v[4].description.find("'mlp.down_proj'"), std::string::npos);
  EXPECT_EQ(chosen.status().message().rfind("5 violations; the first: " + p, 0), 0u);
}

}  // namespace
}  // namespace quantd::algo
