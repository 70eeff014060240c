#include "worker/export/gguf/gguf_recipe.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

namespace quantd::gguf {
namespace {

// The tensors of a Llama checkpoint as llama.cpp names them, listed in an
// order llama.cpp would not visit them in (the rules count layers in
// llama.cpp's order, not the caller's).
std::vector<RecipeTensor> LlamaTensors(int layers, int64_t hidden, int64_t ffn, bool tied) {
  std::vector<RecipeTensor> t;
  for (int i = layers - 1; i >= 0; --i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    for (const char* n : {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up"})
      t.push_back({b + n + ".weight", hidden, 2});
    t.push_back({b + "ffn_down.weight", ffn, 2});
    t.push_back({b + "attn_norm.weight", hidden, 1});
    t.push_back({b + "ffn_norm.weight", hidden, 1});
  }
  t.push_back({"token_embd.weight", hidden, 2});
  t.push_back({"output_norm.weight", hidden, 1});
  if (!tied) t.push_back({"output.weight", hidden, 2});
  return t;
}

std::map<std::string, std::string> Choose(GgufFileType f, const RecipeModel& m,
                                          const std::vector<RecipeTensor>& tensors) {
  auto choices = ChooseRecipeTypes(f, m, tensors);
  EXPECT_TRUE(choices.ok()) << choices.status();
  std::map<std::string, std::string> out;
  if (!choices.ok()) return out;
  for (size_t i = 0; i < tensors.size(); ++i)
    out[tensors[i].name] = (*choices)[i].type ? GetGgmlTypeTraits(*(*choices)[i].type).name : "-";
  return out;
}

// Layers llama.cpp gives more bits in a 32-layer model: the first and last
// four, and every third one from layer 6 (use_more_bits).
const std::set<int> kMoreBits32 = {0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31};

TEST(GgufRecipeTest, Q4KMOnLlama7BShapes) {
  const RecipeModel m{"llama", 32, 32, 32, 0};
  const auto types = Choose(GgufFileType::kQ4_K_M, m, LlamaTensors(32, 4096, 11008, false));
  EXPECT_EQ(types.at("output.weight"), "Q6_K");
  EXPECT_EQ(types.at("token_embd.weight"), "Q4_K");
  EXPECT_EQ(types.at("output_norm.weight"), "-");
  int q6 = 0;
  for (int i = 0; i < 32; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    const std::string more = kMoreBits32.count(i) ? "Q6_K" : "Q4_K";
    EXPECT_EQ(types.at(b + "attn_v.weight"), more) << i;
    EXPECT_EQ(types.at(b + "ffn_down.weight"), more) << i;
    EXPECT_EQ(types.at(b + "attn_q.weight"), "Q4_K") << i;
    EXPECT_EQ(types.at(b + "ffn_up.weight"), "Q4_K") << i;
    EXPECT_EQ(types.at(b + "attn_norm.weight"), "-") << i;
    q6 += types.at(b + "attn_v.weight") == "Q6_K";
  }
  EXPECT_EQ(q6, 16);
}

TEST(GgufRecipeTest, SmallAndMediumRecipesDifferWhereLlamaCppsDo) {
  const RecipeModel m{"llama", 32, 32, 32, 0};
  const auto tensors = LlamaTensors(32, 4096, 11008, false);
  const auto s = Choose(GgufFileType::kQ4_K_S, m, tensors);
  const auto m5 = Choose(GgufFileType::kQ5_K_M, m, tensors);
  const auto q6 = Choose(GgufFileType::kQ6_K, m, tensors);
  const auto q8 = Choose(GgufFileType::kQ8_0, m, tensors);
  const auto q40 = Choose(GgufFileType::kQ4_0, m, tensors);
  for (int i = 0; i < 32; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    // Q4_K_S: Q5_K for attn_v of the first four layers and ffn_down of the
    // first eighth.
    EXPECT_EQ(s.at(b + "attn_v.weight"), i < 4 ? "Q5_K" : "Q4_K") << i;
    EXPECT_EQ(s.at(b + "ffn_down.weight"), i < 4 ? "Q5_K" : "Q4_K") << i;
    EXPECT_EQ(m5.at(b + "ffn_down.weight"), kMoreBits32.count(i) ? "Q6_K" : "Q5_K") << i;
    EXPECT_EQ(q6.at(b + "attn_q.weight"), "Q6_K");
    EXPECT_EQ(q8.at(b + "ffn_down.weight"), "Q8_0");
  }
  // With an importance matrix, Q4_0 gives ffn_down of the first eighth Q4_1.
  RecipeModel with_imatrix = m;
  with_imatrix.has_imatrix = true;
  const auto q40i = Choose(GgufFileType::kQ4_0, with_imatrix, tensors);
  for (int i = 0; i < 32; ++i)
    EXPECT_EQ(q40i.at("blk." + std::to_string(i) + ".ffn_down.weight"), i < 4 ? "Q4_1" : "Q4_0");
  EXPECT_EQ(Choose(GgufFileType::kQ4_K_M, with_imatrix, tensors), Choose(GgufFileType::kQ4_K_M, m, tensors));
  // The head takes Q6_K unless the file is Q8_0, even in a Q4_0 file.
  EXPECT_EQ(q8.at("output.weight"), "Q8_0");
  EXPECT_EQ(q40.at("output.weight"), "Q6_K");
  EXPECT_EQ(q40.at("token_embd.weight"), "Q4_0");
}

// stories260K: 64-wide rows are not whole 256-blocks and 172-wide ones not
// whole 32-blocks, so a K recipe is all llama.cpp's fallbacks; the tied
// embedding takes the head's rule (Q8_0 for rows that are not whole blocks).
TEST(GgufRecipeTest, Stories260KTakesLlamaCppsFallbacks) {
  const RecipeModel m{"llama", 5, 8, 4, 0};
  const auto tensors = LlamaTensors(5, 64, 172, true);
  auto choices = ChooseRecipeTypes(GgufFileType::kQ4_K_M, m, tensors);
  ASSERT_TRUE(choices.ok()) << choices.status();
  const auto types = Choose(GgufFileType::kQ4_K_M, m, tensors);
  EXPECT_EQ(types.at("token_embd.weight"), "Q8_0");
  for (int i = 0; i < 5; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    // use_more_bits(i, 5): layers 2 and 4 (Q6_K, falling back to Q8_0).
    EXPECT_EQ(types.at(b + "attn_v.weight"), i == 2 || i == 4 ? "Q8_0" : "Q5_0") << i;
    EXPECT_EQ(types.at(b + "attn_q.weight"), "Q5_0") << i;
    EXPECT_EQ(types.at(b + "ffn_down.weight"), "F16") << i;
  }
  std::map<std::string, std::optional<GgmlType>> wanted;
  for (size_t i = 0; i < tensors.size(); ++i) wanted[tensors[i].name] = (*choices)[i].wanted;
  EXPECT_EQ(wanted.at("blk.0.attn_q.weight"), GgmlType::kQ4_K);
  EXPECT_EQ(wanted.at("blk.2.ffn_down.weight"), GgmlType::kQ6_K);
  EXPECT_FALSE(wanted.at("token_embd.weight"));
  EXPECT_EQ(Choose(GgufFileType::kQ5_K_S, m, tensors).at("blk.1.ffn_up.weight"), "Q5_1");
  EXPECT_EQ(Choose(GgufFileType::kQ6_K, m, tensors).at("blk.1.ffn_up.weight"), "Q8_0");

  // The 32-element types have no fallback: llama.cpp refuses such a file,
  // and so does quantd, naming every tensor.
  auto q8 = ChooseRecipeTypes(GgufFileType::kQ8_0, m, tensors);
  ASSERT_FALSE(q8.ok());
  EXPECT_EQ(q8.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(q8.status().violations().size(), 5u);
  EXPECT_NE(q8.status().message().find("blk.0.ffn_down.weight: rows of 172 are not whole Q8_0 "
                                       "blocks of 32"),
            std::string::npos)
      << q8.status().message();
}

TEST(GgufRecipeTest, FloatRecipesConvertEveryMatrix) {
  const RecipeModel m{"llama", 5, 8, 4, 0};
  const auto types = Choose(GgufFileType::kF16, m, LlamaTensors(5, 64, 172, true));
  EXPECT_EQ(types.at("token_embd.weight"), "F16");
  EXPECT_EQ(types.at("blk.3.ffn_down.weight"), "F16");
  EXPECT_EQ(types.at("blk.3.ffn_norm.weight"), "-");
}

// GPT-2: the fused attn_qkv counts as attn_v, the position embedding is
// never quantized.
TEST(GgufRecipeTest, Gpt2FusedQkvAndPositionEmbedding) {
  const RecipeModel m{"gpt2", 8, 12, 12, 0};
  std::vector<RecipeTensor> t = {{"position_embd.weight", 768, 2}, {"token_embd.weight", 768, 2}};
  for (int i = 0; i < 8; ++i)
    t.push_back({"blk." + std::to_string(i) + ".attn_qkv.weight", 768, 2});
  const auto types = Choose(GgufFileType::kQ4_K_M, m, t);
  EXPECT_EQ(types.at("position_embd.weight"), "-");
  EXPECT_EQ(types.at("token_embd.weight"), "Q6_K");  // tied: the head's rule
  // use_more_bits(i, 8): i < 1, i >= 7, (i - 1) % 3 == 2 -> 0, 3, 6, 7.
  for (int i = 0; i < 8; ++i)
    EXPECT_EQ(types.at("blk." + std::to_string(i) + ".attn_qkv.weight"),
              i == 0 || i == 3 || i == 6 || i == 7 ? "Q6_K" : "Q4_K")
        << i;
}

TEST(GgufRecipeTest, NamesAreLlamaQuantizes) {
  EXPECT_EQ(GgufFileTypeFromName("q4_k_m"), GgufFileType::kQ4_K_M);
  EXPECT_EQ(GgufFileTypeFromName("Q8_0"), GgufFileType::kQ8_0);
  EXPECT_EQ(GgufFileTypeFromName("Q3_K_M"), GgufFileType::kQ3_K_M);
  EXPECT_FALSE(GgufFileTypeFromName("Q2_K_S"));  // needs an imatrix in llama.cpp; not built
  EXPECT_FALSE(GgufFileTypeFromName(""));
  EXPECT_EQ(GgufFileTypeName(GgufFileType::kQ5_K_S), "Q5_K_S");
  EXPECT_EQ(static_cast<uint32_t>(GgufFileType::kQ4_K_M), 15u);  // llama_ftype
  EXPECT_EQ(DefaultTensorType(GgufFileType::kQ5_K_M), GgmlType::kQ5_K);
  EXPECT_EQ(AllGgufFileTypeNames(),
            "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K_S, Q3_K_M, Q3_K_L, Q4_K_S, "
            "Q4_K_M, Q5_K_S, Q5_K_M, Q6_K");
  EXPECT_EQ(static_cast<uint32_t>(GgufFileType::kQ3_K_L), 13u);
}

// The 2- and 3-bit recipes (llama_tensor_get_type_impl): Q2_K gives attn_v
// Q3_K (Q4_K from 4 query heads per KV head), attn_output and ffn_down
// Q3_K; Q3_K_M attn_v Q5_K in the first two layers and Q4_K after,
// ffn_down Q5_K in the first sixteenth and Q4_K after, attn_output Q4_K;
// Q3_K_L attn_v, attn_output and ffn_down Q5_K; Q3_K_S only the head.
TEST(GgufRecipeTest, TwoAndThreeBitRecipes) {
  const RecipeModel mha{"llama", 32, 32, 32, 0}, gqa{"llama", 32, 32, 8, 0};
  const auto tensors = LlamaTensors(32, 4096, 11008, false);
  const auto q2 = Choose(GgufFileType::kQ2_K, mha, tensors);
  const auto q2_gqa = Choose(GgufFileType::kQ2_K, gqa, tensors);
  const auto s = Choose(GgufFileType::kQ3_K_S, mha, tensors);
  const auto m = Choose(GgufFileType::kQ3_K_M, mha, tensors);
  const auto l = Choose(GgufFileType::kQ3_K_L, mha, tensors);
  EXPECT_EQ(q2.at("output.weight"), "Q6_K");
  EXPECT_EQ(q2.at("token_embd.weight"), "Q2_K");
  EXPECT_EQ(s.at("output.weight"), "Q6_K");
  for (int i = 0; i < 32; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    EXPECT_EQ(q2.at(b + "attn_q.weight"), "Q2_K");
    EXPECT_EQ(q2.at(b + "attn_v.weight"), "Q3_K");
    EXPECT_EQ(q2_gqa.at(b + "attn_v.weight"), "Q4_K");
    EXPECT_EQ(q2.at(b + "attn_output.weight"), "Q3_K");
    EXPECT_EQ(q2.at(b + "ffn_down.weight"), "Q3_K");
    for (const char* n : {"attn_q", "attn_v", "attn_output", "ffn_up", "ffn_down"})
      EXPECT_EQ(s.at(b + n + ".weight"), "Q3_K") << b << n;
    EXPECT_EQ(m.at(b + "attn_v.weight"), i < 2 ? "Q5_K" : "Q4_K") << i;
    EXPECT_EQ(m.at(b + "ffn_down.weight"), i < 2 ? "Q5_K" : "Q4_K") << i;
    EXPECT_EQ(m.at(b + "attn_output.weight"), "Q4_K");
    EXPECT_EQ(m.at(b + "ffn_gate.weight"), "Q3_K");
    for (const char* n : {"attn_v", "attn_output", "ffn_down"})
      EXPECT_EQ(l.at(b + n + ".weight"), "Q5_K") << b << n;
    EXPECT_EQ(l.at(b + "attn_k.weight"), "Q3_K");
  }
  // stories260K: Q2_K and Q3_K fall back to Q4_0, to F16 for 172-wide rows.
  const RecipeModel stories{"llama", 5, 8, 4, 0};
  const auto small = Choose(GgufFileType::kQ2_K, stories, LlamaTensors(5, 64, 172, true));
  EXPECT_EQ(small.at("blk.0.attn_q.weight"), "Q4_0");
  EXPECT_EQ(small.at("blk.0.attn_v.weight"), "Q4_0");
  EXPECT_EQ(small.at("blk.0.ffn_down.weight"), "F16");
  EXPECT_EQ(small.at("token_embd.weight"), "Q8_0");
}

}  // namespace
}  // namespace quantd::gguf
