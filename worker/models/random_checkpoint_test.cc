#include "worker/models/random_checkpoint.h"

#include <cstdlib>

#include "gtest/gtest.h"
#include "worker/io/safetensors/safetensors_source.h"
#include "worker/models/registry.h"

namespace quantd::models {
namespace {

std::string TempDir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  return std::string(base ? base : "/tmp") + "/" + name;
}

TEST(RandomCheckpointTest, ShardedBf16LlamaLoadsAndRuns) {
  RandomCheckpointOptions o;
  o.hidden_size = 64;
  o.intermediate_size = 96;
  o.num_hidden_layers = 3;
  o.num_attention_heads = 4;
  o.num_key_value_heads = 2;
  o.vocab_size = 100;
  o.max_shard_bytes = 40000;  // forces several shards
  const std::string dir = TempDir("rand");
  auto info = WriteRandomLlamaCheckpoint(dir, o);
  ASSERT_TRUE(info.ok()) << info.status();
  // embed + lm_head + 3 x (4 attn + 3 mlp + 2 norms) + final norm, in bf16.
  const uint64_t params =
      2 * 100 * 64 + 3 * (64 * 64 * 2 + 32 * 64 * 2 + 3 * 64 * 96 + 2 * 64) + 64;
  EXPECT_EQ(info->total_bytes, 2 * params);
  EXPECT_GT(info->shards, 2);

  auto src = io::SafetensorsSource::Open(dir);
  ASSERT_TRUE(src.ok()) << src.status();
  EXPECT_EQ((*src)->Files().size(), static_cast<size_t>(info->shards));
  EXPECT_EQ((*src)->Find("model.layers.2.mlp.down_proj.weight")->dtype, "BF16");
  auto q = (*src)->Load("model.layers.0.self_attn.q_proj.weight");
  ASSERT_TRUE(q.ok());
  // Uniform with std 1/sqrt(64): bounded by sqrt(3/64) and centred.
  EXPECT_LE(q->abs().max().item<float>(), std::sqrt(3.0f / 64) * 1.01f);
  EXPECT_NEAR(q->std().item<float>(), 0.125f, 0.01f);
  EXPECT_NEAR(q->mean().item<float>(), 0.0f, 0.01f);
  EXPECT_TRUE(at::equal(*(*src)->Load("model.norm.weight"), at::ones({64})));

  auto model = OpenCausalLM(dir);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ((*model)->config().num_key_value_heads, 2);
  auto logits = (*model)->Forward(at::randint(100, {2, 7}, at::kLong));
  ASSERT_TRUE(logits.ok()) << logits.status();
  EXPECT_TRUE(logits->isfinite().all().item<bool>());
  EXPECT_GT(logits->std().item<float>(), 0.1f);

  // Same seed, same bytes.
  auto again = WriteRandomLlamaCheckpoint(TempDir("rand2"), o);
  ASSERT_TRUE(again.ok());
  auto src2 = io::SafetensorsSource::Open(TempDir("rand2"));
  ASSERT_TRUE(src2.ok());
  EXPECT_TRUE(at::equal(*(*src2)->LoadStored("model.layers.1.mlp.up_proj.weight"),
                        *(*src)->LoadStored("model.layers.1.mlp.up_proj.weight")));
}

// An OLMoE checkpoint with OLMoE's parameter names (whole-width q/k norms,
// mlp.gate, experts of intermediate_size) loads and runs as OlmoeForCausalLM.
TEST(RandomCheckpointTest, OlmoeLoadsAndRuns) {
  RandomCheckpointOptions o;
  o.architecture = "olmoe";
  o.hidden_size = 64;
  o.intermediate_size = 32;
  o.num_hidden_layers = 2;
  o.num_attention_heads = 4;
  o.num_key_value_heads = 2;
  o.vocab_size = 100;
  o.num_experts = 4;
  o.num_experts_per_tok = 2;
  const std::string dir = TempDir("olmoe");
  auto info = WriteRandomLlamaCheckpoint(dir, o);
  ASSERT_TRUE(info.ok()) << info.status();
  auto src = io::SafetensorsSource::Open(dir);
  ASSERT_TRUE(src.ok()) << src.status();
  EXPECT_EQ((*src)->Find("model.layers.1.self_attn.q_norm.weight")->shape,
            (std::vector<int64_t>{64}));
  EXPECT_EQ((*src)->Find("model.layers.1.self_attn.k_norm.weight")->shape,
            (std::vector<int64_t>{32}));
  EXPECT_EQ((*src)->Find("model.layers.1.mlp.gate.weight")->shape, (std::vector<int64_t>{4, 64}));
  EXPECT_EQ((*src)->Find("model.layers.1.mlp.experts.3.down_proj.weight")->shape,
            (std::vector<int64_t>{64, 32}));
  auto model = OpenCausalLM(dir);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ((*model)->config().architecture, "OlmoeForCausalLM");
  EXPECT_TRUE((*model)->config().qk_norm_full_width);
  auto logits = (*model)->Forward(at::randint(100, {2, 7}, at::kLong));
  ASSERT_TRUE(logits.ok()) << logits.status();
  EXPECT_TRUE(logits->isfinite().all().item<bool>());

  o.head_dim = 8;  // 8 x 4 heads != hidden 64
  EXPECT_FALSE(WriteRandomLlamaCheckpoint(TempDir("olmoe_bad"), o).ok());
}

}  // namespace
}  // namespace quantd::models
