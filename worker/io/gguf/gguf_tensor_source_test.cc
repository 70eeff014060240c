#include "worker/io/gguf/gguf_tensor_source.h"

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/io/gguf/rope_layout.h"

namespace quantd::gguf {
namespace {

constexpr char kGguf[] = "models/stories260K/stories260K-f32.gguf";

// Minimal safetensors reading written for this test (F32 only), so the check
// does not depend on the engine's own safetensors reader.
std::map<std::string, at::Tensor> ReadSafetensorsF32(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  const std::string bytes = ss.str();
  uint64_t header_len;
  std::memcpy(&header_len, bytes.data(), 8);
  auto header = nlohmann::json::parse(bytes.substr(8, header_len));
  std::map<std::string, at::Tensor> out;
  for (auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;
    EXPECT_EQ(entry["dtype"], "F32") << name;
    const auto shape = entry["shape"].get<std::vector<int64_t>>();
    const auto offsets = entry["data_offsets"].get<std::vector<uint64_t>>();
    at::Tensor t = at::empty(shape, at::kFloat);
    EXPECT_EQ(offsets[1] - offsets[0], static_cast<uint64_t>(t.numel()) * 4) << name;
    std::memcpy(t.data_ptr(), bytes.data() + 8 + header_len + offsets[0], offsets[1] - offsets[0]);
    out[name] = t;
  }
  return out;
}

bool BitEqual(const at::Tensor& a, const at::Tensor& b) {
  return a.sizes() == b.sizes() && a.scalar_type() == b.scalar_type() &&
         std::memcmp(a.data_ptr(), b.data_ptr(), a.numel() * a.element_size()) == 0;
}

TEST(GgufTensorSourceTest, EveryTensorEqualsTheSafetensorsCopyBitForBit) {
  auto src = GgufTensorSource::Open(kGguf);
  ASSERT_TRUE(src.ok()) << src.status();
  const auto reference = ReadSafetensorsF32("models/stories260K/model.safetensors");
  const auto names = (*src)->Names();
  ASSERT_EQ(names.size(), 48u);
  int compared = 0;
  for (const auto& name : names) {
    auto t = (*src)->Load(name);
    ASSERT_TRUE(t.ok()) << t.status();
    // The checkpoint ties lm_head to the embedding; the GGUF stores a copy.
    const std::string ref_name =
        reference.count(name) ? name
                              : (name == "lm_head.weight" ? "model.embed_tokens.weight" : "");
    ASSERT_FALSE(ref_name.empty()) << name << " has no safetensors counterpart";
    EXPECT_TRUE(BitEqual(*t, reference.at(ref_name))) << name;
    const io::TensorInfo* info = (*src)->Find(name);
    ASSERT_NE(info, nullptr);
    EXPECT_EQ(info->shape, reference.at(ref_name).sizes().vec()) << name;
    EXPECT_EQ(info->dtype, "F32");
    ++compared;
  }
  EXPECT_EQ(compared, 48);
  // Every safetensors tensor is presented by the GGUF.
  for (const auto& [name, t] : reference) EXPECT_NE((*src)->Find(name), nullptr) << name;
}

TEST(GgufTensorSourceTest, QueryRowsArePermutedBackFromLlamaCppOrder) {
  auto src = GgufTensorSource::Open(kGguf);
  ASSERT_TRUE(src.ok()) << src.status();
  auto hf = (*src)->Load("model.layers.0.self_attn.q_proj.weight");
  ASSERT_TRUE(hf.ok());
  const GgufTensorInfo* raw = (*src)->GgufInfo("model.layers.0.self_attn.q_proj.weight");
  ASSERT_NE(raw, nullptr);
  EXPECT_EQ(raw->name, "blk.0.attn_q.weight");
  // Head 0 (8 rows): Hugging Face row 1 is llama.cpp row 2, row 4 is row 1.
  auto back = RopeHalfToInterleaved(*hf, 8);
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(at::equal(back->select(0, 2), hf->select(0, 1)));
  EXPECT_TRUE(at::equal(back->select(0, 1), hf->select(0, 4)));
  auto round_trip = RopeInterleavedToHalf(*back, 8);
  EXPECT_TRUE(at::equal(*round_trip, *hf));
  EXPECT_FALSE(RopeInterleavedToHalf(*hf, 3).ok());
}

TEST(GgufTensorSourceTest, DtypesMetadataAndErrors) {
  auto src = GgufTensorSource::Open(kGguf);
  ASSERT_TRUE(src.ok()) << src.status();
  auto half = (*src)->Load("model.norm.weight", at::kHalf);
  ASSERT_TRUE(half.ok());
  EXPECT_EQ(half->scalar_type(), at::kHalf);
  EXPECT_EQ(half->sizes().vec(), std::vector<int64_t>{64});

  auto missing = (*src)->Load("model.layers.9.mlp.up_proj.weight");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), ::testing::HasSubstr("model.layers.9.mlp.up_proj"));

  const auto meta = (*src)->Metadata();
  EXPECT_EQ(meta.at("general.architecture"), "llama");
  EXPECT_EQ(meta.at("llama.block_count"), "5");
  EXPECT_EQ(meta.at("tokenizer.ggml.tokens"), "[512 string values]");
  auto cfg = nlohmann::json::parse(meta.at("config.json"));
  EXPECT_EQ(cfg["num_key_value_heads"], 4);
  EXPECT_TRUE((*src)->ConfigJson().ok());
  EXPECT_EQ((*src)->Description(), kGguf);

  EXPECT_EQ(GgufTensorSource::Open("models/stories260K/none.gguf").status().code(),
            StatusCode::kNotFound);
  EXPECT_EQ(GgufTensorSource::Open("models/stories260K/model.safetensors").status().code(),
            StatusCode::kDataLoss);
}

}  // namespace
}  // namespace quantd::gguf
