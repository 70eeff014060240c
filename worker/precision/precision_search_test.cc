#include "worker/precision/precision_search.h"

#include <gtest/gtest.h>

namespace quantd::precision {
namespace {

TEST(FusionGroupTest, GroupsWhatServingRuntimesFuse) {
  EXPECT_EQ(FusionGroup("model.layers.3.self_attn.q_proj"), "model.layers.3.self_attn.qkv");
  EXPECT_EQ(FusionGroup("model.layers.3.self_attn.v_proj"), "model.layers.3.self_attn.qkv");
  EXPECT_EQ(FusionGroup("model.layers.3.self_attn.o_proj"), "model.layers.3.self_attn.o_proj");
  EXPECT_EQ(FusionGroup("model.layers.3.mlp.up_proj"), "model.layers.3.mlp.gate_up");
  EXPECT_EQ(FusionGroup("model.layers.3.mlp.down_proj"), "model.layers.3.mlp.down_proj");
  EXPECT_EQ(FusionGroup("model.layers.1.mlp.experts.7.gate_proj"), "model.layers.1.mlp.experts");
  EXPECT_EQ(FusionGroup("model.layers.1.mlp.shared_expert.up_proj"),
            "model.layers.1.mlp.shared_expert.gate_up");
  EXPECT_EQ(FusionGroup("lm_head"), "lm_head");
  EXPECT_EQ(FusionGroup("model.layers.1.block_sparse_moe.experts.0.w2"),
            "model.layers.1.block_sparse_moe.experts");
}

// Candidates: 0 = 4 bits, 1 = 8 bits, 2 = float (16 bits, no error).
SearchLayer Layer(const std::string& name, double s4, double s8) {
  SearchLayer l;
  l.name = name;
  l.bytes = {50, 100, 200};
  l.sensitivity = {s4, s8, 0.0};
  l.weights = 100;
  return l;
}

TEST(PrecisionSearchTest, CheapestWithinUpgradesTheMostSensitivePerByte) {
  PrecisionSearch search({Layer("a", 10, 1), Layer("b", 1, 0.1), Layer("c", 2, 0.2)});
  EXPECT_EQ(search.CheapestCandidate(), 0);
  EXPECT_EQ(search.Bytes(search.Uniform(0)), 150);
  EXPECT_DOUBLE_EQ(search.BitsPerWeight(search.Uniform(0)), 4.0);
  // Anything at or above the uniform sum keeps everything at 4 bits.
  EXPECT_EQ(search.CheapestWithin(13), (Assignment{0, 0, 0}));
  // a to 8 bits removes 9 per 50 bytes, the best move by far.
  EXPECT_EQ(search.CheapestWithin(5), (Assignment{1, 0, 0}));
  // Then c (1.8 per 50 bytes) before b (0.9).
  EXPECT_EQ(search.CheapestWithin(2.5), (Assignment{1, 0, 1}));
  // Zero is reachable only with every layer float.
  EXPECT_EQ(search.CheapestWithin(0), (Assignment{2, 2, 2}));
  EXPECT_DOUBLE_EQ(search.Sensitivity(search.CheapestWithin(0)), 0.0);
}

TEST(PrecisionSearchTest, FusedLayersMoveTogether) {
  PrecisionSearch search({Layer("m.self_attn.q_proj", 10, 1), Layer("m.self_attn.k_proj", 0.1, 0),
                          Layer("m.self_attn.v_proj", 0.1, 0), Layer("m.self_attn.o_proj", 3, 0)});
  const Assignment a = search.CheapestWithin(5);
  EXPECT_EQ(a[0], a[1]);
  EXPECT_EQ(a[1], a[2]);
  EXPECT_EQ(a[0], 1);
  EXPECT_EQ(a[3], 0);
}

// A user's cost table (e.g. measured time per weight) replaces the bytes:
// where 8 bits cost what 4 bits do, the search never picks 4 bits.
TEST(PrecisionSearchTest, CostTableReplacesTheBytes) {
  std::vector<SearchLayer> layers = {Layer("a", 10, 1), Layer("b", 1, 0.1)};
  for (SearchLayer& l : layers) l.cost = {100, 100, 300};
  PrecisionSearch search(std::move(layers));
  EXPECT_DOUBLE_EQ(search.Cost(search.Uniform(1)), 200);
  EXPECT_EQ(search.Bytes(search.Uniform(1)), 200);
  EXPECT_EQ(search.CheapestWithin(1e9), (Assignment{1, 1}));
  EXPECT_EQ(search.CheapestWithin(0.5), (Assignment{2, 1}));
}

TEST(ParetoFrontierTest, DropsDominatedPoints) {
  EXPECT_EQ(ParetoFrontier({{100, 5}, {200, 4}, {150, 6}, {300, 4}, {50, 9}}),
            (std::vector<bool>{true, true, false, false, true}));
}

}  // namespace
}  // namespace quantd::precision
