#include "worker/export/gguf/gguf_export.h"

#include <stdlib.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/export/gguf/gguf_writer.h"
#include "worker/io/gguf/gguf_file.h"
#include "worker/io/gguf/gguf_tensor_source.h"
#include "worker/io/safetensors/safetensors_source.h"
#include "worker/io/tokenizer/gguf_tokenizer.h"
#include "worker/models/random_checkpoint.h"

namespace quantd::gguf {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

constexpr char kOfficial[] = "models/stories260K/stories260K-f32.gguf";

std::string TempPath(const std::string& name) {
  const char* tmp = getenv("TEST_TMPDIR");
  return (fs::path(tmp ? tmp : "/tmp") / name).string();
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<uint8_t> RawBytes(const std::string& path, const std::string& tensor) {
  auto src = OpenFileByteSource(path);
  auto file = ParseGguf(**src);
  const GgufTensorInfo* t = file->FindTensor(tensor);
  EXPECT_NE(t, nullptr) << tensor << " in " << path;
  if (!t) return {};
  return *ReadGgufTensorBytes(*file, **src, *t);
}

// Exports `source` (with the official file's tokenizer) to GGUF.
Status Export(const io::TensorSource& source, const std::string& config, GgmlType type,
              const std::string& path) {
  auto official = ReadGgufFile(kOfficial);
  EXPECT_TRUE(official.ok());
  auto tok = io::LoadTokenizerFromGguf(*official);
  EXPECT_TRUE(tok.ok()) << tok.status();
  auto kv = io::TokenizerGgufMetadata(**tok);
  EXPECT_TRUE(kv.ok()) << kv.status();
  GgufExportOptions options;
  options.weight_type = type;
  options.model_name = "stories260K";
  options.extra_metadata = *kv;
  return WriteGgufFromHf(config, source, options, path);
}

// Reading the official GGUF as a Hugging Face checkpoint and writing it back
// reproduces llama.cpp's tensors byte for byte (names, layouts, RoPE order).
TEST(GgufExportTest, RoundTripReproducesTheOfficialFileTensorBytes) {
  auto src = GgufTensorSource::Open(kOfficial);
  ASSERT_TRUE(src.ok()) << src.status();
  const std::string out = TempPath("roundtrip-f32.gguf");
  ASSERT_TRUE(Export(**src, *(*src)->ConfigJson(), GgmlType::kF32, out).ok());

  auto official = ReadGgufFile(kOfficial);
  auto written = ReadGgufFile(out);
  ASSERT_TRUE(written.ok()) << written.status();
  ASSERT_EQ(written->tensors.size(), official->tensors.size());
  for (const auto& t : official->tensors) {
    const GgufTensorInfo* w = written->FindTensor(t.name);
    ASSERT_NE(w, nullptr) << t.name;
    EXPECT_EQ(w->ne, t.ne) << t.name;
    EXPECT_EQ(w->type, GgmlType::kF32);
    EXPECT_EQ(RawBytes(out, t.name), RawBytes(kOfficial, t.name)) << t.name;
  }
  for (const char* key :
       {"general.architecture", "llama.embedding_length", "llama.feed_forward_length",
        "llama.attention.head_count", "llama.attention.head_count_kv", "llama.block_count",
        "llama.rope.dimension_count", "llama.attention.layer_norm_rms_epsilon",
        "tokenizer.ggml.model", "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id"}) {
    ASSERT_NE(written->Find(key), nullptr) << key;
    EXPECT_EQ(written->Find(key)->ToText(), official->Find(key)->ToText()) << key;
  }
  EXPECT_EQ(*written->GetStringArray("tokenizer.ggml.tokens"),
            *official->GetStringArray("tokenizer.ggml.tokens"));
  EXPECT_EQ(*written->GetFloatArray("tokenizer.ggml.scores"),
            *official->GetFloatArray("tokenizer.ggml.scores"));
  EXPECT_EQ(*written->GetIntArray("tokenizer.ggml.token_type"),
            *official->GetIntArray("tokenizer.ggml.token_type"));
  EXPECT_EQ(*written->GetInt("general.file_type"), 0);

  // The embedded tokenizer reads back with the same ids.
  auto tok = io::LoadTokenizerFromGgufPath(out);
  ASSERT_TRUE(tok.ok());
  EXPECT_THAT((*tok)->Encode("Once upon a time"), ::testing::ElementsAre(403, 407, 261, 378));
}

// The Hugging Face safetensors checkpoint (tied embeddings, rotate-half q/k)
// exports to the official tensors too, without output.weight.
TEST(GgufExportTest, SafetensorsCheckpointExportsToLlamaCppLayout) {
  auto st = io::SafetensorsSource::Open("models/stories260K/model.safetensors");
  ASSERT_TRUE(st.ok()) << st.status();
  const std::string out = TempPath("from-safetensors.gguf");
  const std::string config = ReadFile("models/stories260K/config.json");
  ASSERT_TRUE(Export(**st, config, GgmlType::kF32, out).ok());
  auto written = ReadGgufFile(out);
  ASSERT_TRUE(written.ok());
  EXPECT_EQ(written->FindTensor("output.weight"), nullptr);
  for (const auto& t : written->tensors) {
    EXPECT_EQ(RawBytes(out, t.name), RawBytes(kOfficial, t.name)) << t.name;
  }
  EXPECT_EQ(written->tensors.size(), 47u);
  EXPECT_EQ(*written->GetInt("llama.context_length"), 512);
  auto cfg = nlohmann::json::parse(*BuildHfConfigJson(*written));
  EXPECT_EQ(cfg["tie_word_embeddings"], true);
}

// OLMoE as llama.cpp's olmoe (src/models/olmoe.cpp): the whole-width q/k
// norms, the router as ffn_gate_inp, each expert's rows stacked into
// ffn_{gate,up,down}_exps, q/k rows in Hugging Face's rotate-half order
// (llama.cpp's NEOX rope), experts of feed_forward_length.
TEST(GgufExportTest, OlmoeExportsAsLlamaCppsOlmoe) {
  const std::string dir = TempPath("olmoe-random");
  models::RandomCheckpointOptions o;
  o.architecture = "olmoe";
  o.hidden_size = 64;
  o.intermediate_size = 32;
  o.num_hidden_layers = 2;
  o.num_attention_heads = 4;
  o.num_key_value_heads = 4;
  o.vocab_size = 512;  // stories260K's tokenizer
  o.num_experts = 4;
  o.num_experts_per_tok = 2;
  o.dtype = io::SafetensorsDtype::kF32;
  ASSERT_TRUE(models::WriteRandomLlamaCheckpoint(dir, o).ok());
  auto st = io::SafetensorsSource::Open(dir);
  ASSERT_TRUE(st.ok()) << st.status();
  const std::string out = TempPath("olmoe.gguf");
  ASSERT_TRUE(Export(**st, ReadFile(dir + "/config.json"), GgmlType::kF32, out).ok());
  auto g = ReadGgufFile(out);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(*g->GetString("general.architecture"), "olmoe");
  EXPECT_EQ(*g->GetInt("olmoe.expert_count"), 4);
  EXPECT_EQ(*g->GetInt("olmoe.expert_used_count"), 2);
  EXPECT_EQ(*g->GetInt("olmoe.feed_forward_length"), 32);
  EXPECT_FALSE(g->GetInt("olmoe.expert_feed_forward_length").ok());
  auto ne = [&](const std::string& name) {
    const GgufTensorInfo* t = g->FindTensor(name);
    EXPECT_NE(t, nullptr) << name;
    return t ? t->ne : std::vector<int64_t>{};
  };
  EXPECT_EQ(ne("blk.1.attn_q_norm.weight"), (std::vector<int64_t>{64}));
  EXPECT_EQ(ne("blk.1.attn_k_norm.weight"), (std::vector<int64_t>{64}));
  EXPECT_EQ(ne("blk.1.ffn_gate_inp.weight"), (std::vector<int64_t>{64, 4}));
  EXPECT_EQ(ne("blk.1.ffn_gate_exps.weight"), (std::vector<int64_t>{64, 32, 4}));
  EXPECT_EQ(ne("blk.1.ffn_down_exps.weight"), (std::vector<int64_t>{32, 64, 4}));
  EXPECT_EQ(ne("output.weight"), (std::vector<int64_t>{64, 512}));
  auto bytes = [&](const std::string& hf) {
    at::Tensor t = *(*st)->Load(hf);
    const auto* p = static_cast<const uint8_t*>(t.data_ptr());
    return std::vector<uint8_t>(p, p + t.numel() * 4);
  };
  // Rows as stored, and expert 2's up_proj the third slice.
  EXPECT_EQ(RawBytes(out, "blk.0.attn_q.weight"), bytes("model.layers.0.self_attn.q_proj.weight"));
  const std::vector<uint8_t> up = RawBytes(out, "blk.0.ffn_up_exps.weight");
  const std::vector<uint8_t> up2 = bytes("model.layers.0.mlp.experts.2.up_proj.weight");
  ASSERT_EQ(up.size(), 4 * up2.size());
  EXPECT_TRUE(std::equal(up2.begin(), up2.end(), up.begin() + 2 * up2.size()));
}

TEST(GgufExportTest, F16WeightsAndF32Norms) {
  auto src = GgufTensorSource::Open(kOfficial);
  ASSERT_TRUE(src.ok());
  const std::string out = TempPath("f16.gguf");
  ASSERT_TRUE(Export(**src, *(*src)->ConfigJson(), GgmlType::kF16, out).ok());
  auto back = GgufTensorSource::Open(out);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*(*back)->file().GetInt("general.file_type"), 1);
  for (const auto& name : (*src)->Names()) {
    const auto original = *(*src)->Load(name);
    const auto reread = *(*back)->Load(name);
    if (original.dim() == 1) {
      EXPECT_EQ((*back)->Find(name)->dtype, "F32") << name;
      EXPECT_TRUE(at::equal(reread, original)) << name;
    } else {
      EXPECT_EQ((*back)->Find(name)->dtype, "F16") << name;
      EXPECT_TRUE(at::equal(reread, original.to(at::kHalf).to(at::kFloat))) << name;
    }
  }
}

TEST(GgufExportTest, WriterRoundTripsEveryValueTypeAndAlignment) {
  GgufWriter w(64);
  w.Set("a.u8", GgufValue::Uint32(7));
  w.Set("a.str", GgufValue::String("x y"));
  w.Set("a.f", GgufValue::Float32(0.5f));
  w.Set("a.b", GgufValue::Bool(true));
  w.Set("a.strs", GgufValue::StringArray({"p", "q"}));
  w.Set("a.ints", GgufValue::Int32Array({-1, 2}));
  w.Set("a.u8", GgufValue::Uint64(1ull << 40));  // replaces, keeps position
  ASSERT_TRUE(w.AddFloatTensor("t", {3, 2}, GgmlType::kF32, {1, 2, 3, 4, 5, 6}).ok());
  ASSERT_TRUE(w.AddFloatTensor("h", {2}, GgmlType::kF16, {0.5f, -2.0f}).ok());
  EXPECT_EQ(w.AddFloatTensor("t", {1}, GgmlType::kF32, {0}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(w.AddFloatTensor("q", {31}, GgmlType::kQ8_0, std::vector<float>(31)).code(),
            StatusCode::kInvalidArgument);
  const std::string path = TempPath("writer.gguf");
  ASSERT_TRUE(w.Write(path).ok());
  auto f = ReadGgufFile(path);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->alignment, 64u);
  EXPECT_EQ(f->metadata[1].first, "a.u8");
  EXPECT_EQ(*f->GetInt("a.u8"), 1ll << 40);
  EXPECT_EQ(*f->GetString("a.str"), "x y");
  EXPECT_EQ(*f->GetFloat("a.f"), 0.5);
  EXPECT_TRUE(*f->GetBool("a.b"));
  EXPECT_THAT(*f->GetIntArray("a.ints"), ::testing::ElementsAre(-1, 2));
  auto src = OpenFileByteSource(path);
  EXPECT_THAT(*ReadGgufTensorAsFloat(*f, **src, *f->FindTensor("t")),
              ::testing::ElementsAre(1, 2, 3, 4, 5, 6));
  EXPECT_THAT(*ReadGgufTensorAsFloat(*f, **src, *f->FindTensor("h")),
              ::testing::ElementsAre(0.5f, -2.0f));
  EXPECT_EQ(f->FindTensor("h")->offset % 64, 0u);

  // A failing producer leaves no file behind.
  GgufWriter bad;
  ASSERT_TRUE(bad.AddTensor("x", {4}, GgmlType::kF32,
                            [](std::vector<uint8_t>* b) { return DataLossError("source broke"); })
                  .ok());
  const std::string bad_path = TempPath("bad.gguf");
  Status s = bad.Write(bad_path);
  EXPECT_THAT(s.message(), HasSubstr("GGUF tensor x: source broke"));
  EXPECT_FALSE(fs::exists(bad_path));
  EXPECT_FALSE(fs::exists(bad_path + ".tmp"));
  GgufWriter iq2;
  ASSERT_TRUE(iq2.AddFloatTensor("q", {256}, GgmlType::kIQ2_XXS, std::vector<float>(256)).ok());
  EXPECT_THAT(iq2.Write(TempPath("iq2.gguf")).message(), HasSubstr("IQ2_XXS"));
}

TEST(GgufExportTest, RefusesUnknownArchitecturesAndTensors) {
  auto src = GgufTensorSource::Open(kOfficial);
  ASSERT_TRUE(src.ok());
  GgufExportOptions options;
  auto s = WriteGgufFromHf(R"({"architectures": ["MambaForCausalLM"]})", **src, options,
                           TempPath("x.gguf"));
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  EXPECT_THAT(s.message(), HasSubstr("MambaForCausalLM"));
  auto missing = WriteGgufFromHf(R"({"architectures": ["LlamaForCausalLM"], "vocab_size": 5})",
                                 **src, options, TempPath("y.gguf"));
  EXPECT_THAT(missing.message(), HasSubstr("hidden_size"));
}

}  // namespace
}  // namespace quantd::gguf
