#include "worker/algo/channel_scaling.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdlib>

#include "gtest/gtest.h"
#include "worker/models/random_checkpoint.h"
#include "worker/models/registry.h"

namespace quantd::algo {
namespace {

TEST(ChannelScalingTest, FoldingKeepsTheBlockFunction) {
  auto model = models::OpenCausalLM("models/stories260K");
  ASSERT_TRUE(model.ok()) << model.status();
  auto block = (*model)->LoadBlock(1);
  ASSERT_TRUE(block.ok()) << block.status();
  at::manual_seed(1);
  at::Tensor x = at::randn({2, 24, 64});
  auto before = (*block)->Forward(x);
  ASSERT_TRUE(before.ok());

  // stories260K has grouped-query attention: o_proj's group cannot fold
  // (v_proj has fewer outputs than o_proj has inputs).
  const auto& groups = (*block)->groups();
  ASSERT_EQ(groups.size(), 4u);
  EXPECT_TRUE(CanFoldScales(**block, groups[0]));
  EXPECT_FALSE(CanFoldScales(**block, groups[1]));
  EXPECT_TRUE(CanFoldScales(**block, groups[2]));
  EXPECT_TRUE(CanFoldScales(**block, groups[3]));
  at::Tensor q_before = (*block)->FindLinear(groups[0].linears[0])->weight().clone();
  for (size_t g : {0u, 2u, 3u}) {
    const int64_t n = (*block)->FindLinear(groups[g].linears[0])->in_features();
    ASSERT_TRUE(FoldChannelScales(**block, groups[g], at::rand({n}) * 4 + 0.25).ok());
  }
  EXPECT_FALSE(at::allclose((*block)->FindLinear(groups[0].linears[0])->weight(), q_before));
  auto after = (*block)->Forward(x);
  ASSERT_TRUE(after.ok());
  EXPECT_LT((*after - *before).abs().max().item<float>(), 1e-5);

  EXPECT_EQ(FoldChannelScales(**block, groups[1], at::ones({64})).code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(FoldChannelScales(**block, groups[0], at::ones({63})).code(),
            StatusCode::kInvalidArgument);
}

// Gemma's RMSNorms scale by (1 + weight): a folded scale must divide that,
// not the stored weight.
TEST(ChannelScalingTest, FoldingIntoGemmaNormsKeepsTheBlockFunction) {
  const std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/gemma3";
  models::RandomCheckpointOptions o;
  o.architecture = "gemma3";
  o.hidden_size = 64;
  o.intermediate_size = 96;
  o.num_hidden_layers = 1;
  o.num_attention_heads = 4;
  o.num_key_value_heads = 4;
  o.head_dim = 16;
  o.vocab_size = 32;
  o.tie_word_embeddings = true;
  o.dtype = io::SafetensorsDtype::kF32;
  ASSERT_TRUE(models::WriteRandomLlamaCheckpoint(dir, o).ok());
  auto model = models::OpenCausalLM(dir);
  ASSERT_TRUE(model.ok()) << model.status();
  auto block = (*model)->LoadBlock(0);
  ASSERT_TRUE(block.ok()) << block.status();
  at::manual_seed(2);
  const at::Tensor x = at::randn({2, 12, 64});
  auto before = (*block)->Forward(x);
  ASSERT_TRUE(before.ok());
  const auto& groups = (*block)->groups();
  ASSERT_EQ(groups.size(), 4u);
  EXPECT_EQ(groups[0].prev_op, "model.layers.0.input_layernorm");
  EXPECT_EQ(groups[2].prev_op, "model.layers.0.pre_feedforward_layernorm");
  for (size_t g = 0; g < groups.size(); ++g) {
    ASSERT_TRUE(CanFoldScales(**block, groups[g])) << g;
    const int64_t n = (*block)->FindLinear(groups[g].linears[0])->in_features();
    ASSERT_TRUE(FoldChannelScales(**block, groups[g], at::rand({n}) * 4 + 0.25).ok());
  }
  auto after = (*block)->Forward(x);
  ASSERT_TRUE(after.ok());
  EXPECT_LT((*after - *before).abs().max().item<float>(),
            1e-5 * std::max(1.0f, before->abs().max().item<float>()));
}

TEST(ChannelScalingTest, CapturesInputsAndOutputs) {
  auto model = models::OpenCausalLM("models/stories260K");
  ASSERT_TRUE(model.ok());
  auto block = (*model)->LoadBlock(0);
  ASSERT_TRUE(block.ok());
  at::Tensor x = at::randn({3, 10, 64});
  const std::string down = "model.layers.0.mlp.down_proj";
  auto caps = CaptureLinears(**block, x, {down}, {down});
  ASSERT_TRUE(caps.ok()) << caps.status();
  const at::Tensor& in = caps->inputs.at(down);
  EXPECT_EQ(in.sizes(), (std::vector<int64_t>{30, 172}));
  const models::Linear* l = (*block)->FindLinear(down);
  EXPECT_TRUE(at::allclose(caps->outputs.at(down).reshape({30, 64}), in.matmul(l->weight().t()),
                           1e-5, 1e-6));
  auto out = (*block)->Forward(x);
  EXPECT_TRUE(at::equal(caps->block_output, *out));
  EXPECT_TRUE(at::equal(ChannelAbsMax(in), std::get<0>(in.abs().max(0))));
}

}  // namespace
}  // namespace quantd::algo
