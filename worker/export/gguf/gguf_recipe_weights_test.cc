#include "worker/export/gguf/gguf_recipe_weights.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "worker/io/safetensors/safetensors_source.h"

namespace quantd::gguf {
namespace {

constexpr char kModel[] = "models/stories260K";

std::string ConfigJson() {
  std::ifstream in(std::string(kModel) + "/config.json");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::shared_ptr<GgufRecipeWeights> Recipe(GgufFileType type) {
  auto base = io::SafetensorsSource::Open(kModel);
  EXPECT_TRUE(base.ok()) << base.status();
  if (!base.ok()) return nullptr;
  auto recipe = GgufRecipeWeights::Create(std::shared_ptr<const io::TensorSource>(std::move(*base)),
                                          ConfigJson(), type);
  EXPECT_TRUE(recipe.ok()) << recipe.status();
  return recipe.ok() ? *recipe : nullptr;
}

// What ggml's quantizer and dequantizer make of a float matrix, row-wise.
at::Tensor RoundTrip(GgmlType type, const at::Tensor& w, std::vector<uint8_t>* bytes) {
  at::Tensor rows = w.contiguous();
  bytes->resize(*GgmlRowBytes(type, rows.numel()));
  EXPECT_TRUE(QuantizeRow(type, rows.data_ptr<float>(), bytes->data(), rows.numel()).ok());
  at::Tensor out = at::empty(rows.sizes(), at::kFloat);
  EXPECT_TRUE(DequantizeRow(type, bytes->data(), out.data_ptr<float>(), out.numel()).ok());
  return out;
}

// The weights a recipe job reads are the decoded blocks the export writes:
// the same quantizer on the same float32 weights.
TEST(GgufRecipeWeightsTest, ServesTheDecodedBlocksItEncodes) {
  auto recipe = Recipe(GgufFileType::kQ4_K_M);
  ASSERT_TRUE(recipe);
  auto base = io::SafetensorsSource::Open(kModel);
  ASSERT_TRUE(base.ok());
  const GgufLayoutFn identity = [](const at::Tensor& t) -> StatusOr<at::Tensor> {
    return t.contiguous();
  };
  for (const auto& [name, type] : std::vector<std::pair<std::string, GgmlType>>{
           {"model.layers.0.self_attn.q_proj.weight", GgmlType::kQ5_0},
           {"model.layers.2.self_attn.v_proj.weight", GgmlType::kQ8_0},
           {"model.layers.1.mlp.down_proj.weight", GgmlType::kF16},
           {"model.embed_tokens.weight", GgmlType::kQ8_0}}) {
    const RecipeTensorPlan* p = recipe->PlanOf(name);
    ASSERT_NE(p, nullptr) << name;
    EXPECT_EQ(p->type, type) << name;
    auto w = (*base)->Load(name, at::kFloat);
    ASSERT_TRUE(w.ok());
    std::vector<uint8_t> want_bytes, got_bytes;
    const at::Tensor want = RoundTrip(type, *w, &want_bytes);
    auto got = recipe->Load(name, at::kFloat);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_TRUE(at::equal(*got, want)) << name;
    EXPECT_FALSE(at::equal(*got, *w)) << name << " was not quantized";
    ASSERT_TRUE(recipe->Encode(name, identity, at::Tensor(), &got_bytes).ok());
    EXPECT_EQ(got_bytes, want_bytes) << name;
  }
  // Norms are not the recipe's: served as they are.
  const std::string norm = "model.layers.0.input_layernorm.weight";
  EXPECT_EQ(recipe->PlanOf(norm), nullptr);
  EXPECT_TRUE(at::equal(*recipe->Load(norm, at::kFloat), *(*base)->Load(norm, at::kFloat)));
  EXPECT_EQ(recipe->Load(norm, at::kBFloat16)->scalar_type(), at::kBFloat16);
  EXPECT_EQ(recipe->DescribeTypes(),
            (std::vector<std::string>{"F16: 5 weights", "Q5_0: 28 weights", "Q8_0: 3 weights"}));
  const auto fallbacks = recipe->DescribeFallbacks();
  ASSERT_EQ(fallbacks.size(), 4u);
  EXPECT_EQ(fallbacks[1],
            "Q5_0 for Q4_K: 28 weights whose rows are not whole blocks of 256 "
            "(blk.0.ffn_gate.weight, blk.0.ffn_up.weight, blk.0.attn_k.weight, ...)");
}

// With an importance vector the recipe's blocks are ggml's weighted ones
// (QuantizeRows), for the job's weights and the export's blocks alike.
TEST(GgufRecipeWeightsTest, ImportanceWeighsTheBlocks) {
  auto recipe = Recipe(GgufFileType::kQ4_K_M);
  ASSERT_TRUE(recipe);
  auto base = io::SafetensorsSource::Open(kModel);
  ASSERT_TRUE(base.ok());
  const std::string name = "model.layers.1.self_attn.q_proj.weight";  // Q5_0, [64, 64]
  at::Tensor w = *(*base)->Load(name, at::kFloat);
  at::Tensor importance = at::arange(64, at::kFloat).remainder(7).add(0.5);
  std::vector<uint8_t> want(*GgmlRowBytes(GgmlType::kQ5_0, w.numel()));
  ASSERT_TRUE(QuantizeRows(GgmlType::kQ5_0, w.data_ptr<float>(), want.data(), 64, 64,
                           importance.data_ptr<float>())
                  .ok());
  at::Tensor decoded = at::empty({64, 64}, at::kFloat);
  ASSERT_TRUE(
      DequantizeRow(GgmlType::kQ5_0, want.data(), decoded.data_ptr<float>(), decoded.numel()).ok());
  auto got = recipe->Decode(name, importance);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(at::equal(*got, decoded));
  EXPECT_FALSE(at::equal(*got, *recipe->Load(name, at::kFloat)));
  std::vector<uint8_t> bytes;
  const GgufLayoutFn identity = [](const at::Tensor& t) -> StatusOr<at::Tensor> {
    return t.contiguous();
  };
  ASSERT_TRUE(recipe->Encode(name, identity, importance, &bytes).ok());
  EXPECT_EQ(bytes, want);
  EXPECT_EQ(recipe->Decode(name, at::ones({63})).status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(at::equal(ImportanceFromSums(at::tensor({2.f, 4.f, 6.f}), 2.f),
                        at::tensor({1.f, 2.f, 3.f})));
}

TEST(GgufRecipeWeightsTest, RefusesRowsTheRecipeCannotHold) {
  auto base = io::SafetensorsSource::Open(kModel);
  ASSERT_TRUE(base.ok());
  auto q8 = GgufRecipeWeights::Create(std::shared_ptr<const io::TensorSource>(std::move(*base)),
                                      ConfigJson(), GgufFileType::kQ8_0);
  ASSERT_FALSE(q8.ok());
  EXPECT_EQ(q8.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(q8.status().message().find("ffn_down.weight: rows of 172"), std::string::npos)
      << q8.status().message();
}

}  // namespace
}  // namespace quantd::gguf
