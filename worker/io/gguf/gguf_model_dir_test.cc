#include "worker/io/gguf/gguf_model_dir.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "gtest/gtest.h"
#include "worker/export/gguf/gguf_writer.h"
#include "worker/io/gguf/gguf_file.h"

namespace quantd::gguf {
namespace {

namespace fs = std::filesystem;

constexpr char kGguf[] = "models/stories260K/stories260K-f32.gguf";

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A fresh directory holding `gguf` as model.gguf.
std::string ModelDir(const std::string& name, const std::string& gguf) {
  const fs::path dir = fs::path(testing::TempDir()) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy_file(gguf, dir / kGgufModelFileName);
  return dir.string();
}

// The bundled GGUF with `extra` metadata set (tensors copied as they are).
std::string RewrittenGguf(const std::string& name,
                          std::vector<std::pair<std::string, GgufValue>> extra) {
  auto source = OpenFileByteSource(kGguf);
  EXPECT_TRUE(source.ok());
  auto file = ParseGguf(**source);
  EXPECT_TRUE(file.ok());
  GgufWriter w(file->alignment);
  for (const auto& [key, value] : file->metadata) w.Set(key, value);
  for (auto& [key, value] : extra) w.Set(key, std::move(value));
  const ByteSource* bytes = source->get();
  for (const GgufTensorInfo& t : file->tensors) {
    const GgufFile* f = &*file;
    EXPECT_TRUE(w.AddTensor(t.name, t.ne, t.type, [f, bytes, t](std::vector<uint8_t>* out) {
                   QD_ASSIGN_OR_RETURN(*out, ReadGgufTensorBytes(*f, *bytes, t));
                   return OkStatus();
                 }).ok());
  }
  const std::string path = (fs::path(testing::TempDir()) / name).string();
  EXPECT_TRUE(w.Write(path).ok());
  return path;
}

TEST(GgufModelDirTest, ConfigJsonDescribesTheSameModelAsTheCheckpoints) {
  const std::string dir = ModelDir("plain", kGguf);
  ASSERT_TRUE(HasGgufModel(dir));
  ASSERT_TRUE(LooksLikeGguf(dir + "/model.gguf"));
  ASSERT_TRUE(WriteGgufModelDir(dir).ok());
  const auto made = nlohmann::json::parse(Slurp(dir + "/config.json"));
  const auto hf = nlohmann::json::parse(Slurp("models/stories260K/config.json"));
  for (const char* key : {"hidden_size", "intermediate_size", "num_hidden_layers",
                          "num_attention_heads", "num_key_value_heads", "vocab_size"}) {
    EXPECT_EQ(made.at(key), hf.at(key)) << key;
  }
  // The official file says llama.context_length 2048 (config.json: 512).
  EXPECT_EQ(made.at("max_position_embeddings"), 2048);
  EXPECT_EQ(made.at("architectures"), nlohmann::json::array({"LlamaForCausalLM"}));
  EXPECT_DOUBLE_EQ(made.at("rms_norm_eps").get<double>(), hf.at("rms_norm_eps").get<double>());
  // Its SentencePiece vocabulary as Transformers reads it; no chat template
  // in the official file.
  EXPECT_TRUE(fs::exists(dir + "/tokenizer.model"));
  const auto tok = nlohmann::json::parse(Slurp(dir + "/tokenizer_config.json"));
  EXPECT_EQ(tok.at("bos_token"), "<s>");
  EXPECT_EQ(tok.at("eos_token"), "</s>");
  EXPECT_EQ(tok.at("add_bos_token"), true);
  EXPECT_FALSE(tok.contains("chat_template"));
  EXPECT_FALSE(fs::exists(dir + "/chat_template.jinja"));
  // Written once: a second call finds the files and refuses to replace them.
  const Status again = WriteGgufModelDir(dir);
  EXPECT_EQ(again.code(), StatusCode::kFailedPrecondition) << again;
}

TEST(GgufModelDirTest, ChatTemplateIsWrittenAsTheFileHoldsIt) {
  const std::string tmpl = "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}";
  const std::string dir = ModelDir(
      "chat",
      RewrittenGguf("chat.gguf", {{"tokenizer.chat_template", GgufValue::String(tmpl)},
                                  {"tokenizer.ggml.padding_token_id", GgufValue::Uint32(0)}}));
  ASSERT_TRUE(WriteGgufModelDir(dir).ok());
  EXPECT_EQ(Slurp(dir + "/chat_template.jinja"), tmpl);
  // Older Transformers read the template and the pad token from here.
  const auto tok = nlohmann::json::parse(Slurp(dir + "/tokenizer_config.json"));
  EXPECT_EQ(tok.at("chat_template"), tmpl);
  EXPECT_EQ(tok.at("pad_token"), "<unk>");
}

TEST(GgufModelDirTest, RefusesAChatTemplateOverTheLimit) {
  const std::string dir = ModelDir(
      "bigchat", RewrittenGguf("bigchat.gguf",
                               {{"tokenizer.chat_template",
                                 GgufValue::String(std::string(kMaxChatTemplateBytes + 1, 'x'))}}));
  const Status s = WriteGgufModelDir(dir);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("over 1 MiB"), std::string::npos) << s;
}

TEST(GgufModelDirTest, RefusesOnePartOfASplitFile) {
  const std::string dir =
      ModelDir("split", RewrittenGguf("split.gguf", {{"split.count", GgufValue::Uint32(3)}}));
  const Status s = WriteGgufModelDir(dir);
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented) << s;
  EXPECT_NE(s.message().find("one part of 3"), std::string::npos) << s;
  EXPECT_FALSE(fs::exists(dir + "/config.json"));
}

TEST(GgufModelDirTest, RefusesAnArchitectureWithoutAMapping) {
  const std::string dir = ModelDir(
      "bert", RewrittenGguf("bert.gguf", {{"general.architecture", GgufValue::String("bert")}}));
  const Status s = WriteGgufModelDir(dir);
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented) << s;
  EXPECT_NE(s.message().find("'bert'"), std::string::npos) << s;
}

TEST(GgufModelDirTest, NotAGgufIsRefusedNamingTheFile) {
  const fs::path dir = fs::path(testing::TempDir()) / "text";
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / kGgufModelFileName) << "{\"not\": \"a gguf\"}";
  EXPECT_FALSE(LooksLikeGguf((dir / kGgufModelFileName).string()));
  const Status s = WriteGgufModelDir(dir.string());
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("model.gguf"), std::string::npos) << s;
}

}  // namespace
}  // namespace quantd::gguf
