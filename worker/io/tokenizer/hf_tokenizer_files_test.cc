#include "worker/io/tokenizer/hf_tokenizer_files.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/io/tokenizer/gguf_tokenizer.h"
#include "worker/io/tokenizer/load_tokenizer.h"
#include "worker/io/tokenizer/sentencepiece_model.h"
#include "worker/io/tokenizer/sentencepiece_tokenizer.h"
#include "worker/io/tokenizer/vocab_cases.h"

namespace quantd::io {
namespace {

namespace fs = std::filesystem;

// The files for `gguf`'s tokenizer, written into a fresh directory.
std::map<std::string, std::string> WriteFiles(const std::string& gguf, const std::string& dir) {
  auto tok = LoadTokenizerFromGgufPath(gguf);
  EXPECT_TRUE(tok.ok()) << tok.status();
  auto files = HfTokenizerFiles(**tok);
  EXPECT_TRUE(files.ok()) << files.status();
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::map<std::string, std::string> out;
  for (const auto& [name, text] : *files) {
    std::ofstream(fs::path(dir) / name, std::ios::binary) << text;
    out[name] = text;
  }
  return out;
}

class HfTokenizerFilesTest : public ::testing::TestWithParam<const char*> {};

// The Hugging Face files of each of llama.cpp's test vocabularies, read back
// by the loaders quantd uses for Hugging Face directories, give the ids that
// Hugging Face's tokenizers gave for the same texts, and the same special
// tokens as the GGUF.
TEST_P(HfTokenizerFilesTest, ReadBackTheyGiveHuggingFacesIds) {
  const std::string gguf =
      std::string("tests/golden/tokenizers/ggml-vocab-") + GetParam() + ".gguf";
  const std::string dir = (fs::path(testing::TempDir()) / GetParam()).string();
  const auto files = WriteFiles(gguf, dir);
  auto original = LoadTokenizerFromGgufPath(gguf);
  ASSERT_TRUE(original.ok());
  auto tok = LoadTokenizerFromDir(dir);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->vocab_size(), (*original)->vocab_size());
  EXPECT_EQ((*tok)->bos_id(), (*original)->bos_id());
  EXPECT_EQ((*tok)->eos_id(), (*original)->eos_id());
  EXPECT_EQ((*tok)->add_bos(), (*original)->add_bos());
  const auto cases = ReadVocabCases(gguf);
  ASSERT_EQ(cases.size(), 46u);
  for (const auto& c : cases) EXPECT_EQ((*tok)->Encode(c.text), c.ids) << "[" << c.text << "]";

  const auto config = nlohmann::json::parse(files.at("tokenizer_config.json"));
  EXPECT_EQ(config.at("add_bos_token"), (*original)->add_bos());
  if ((*original)->eos_id() >= 0) {
    EXPECT_TRUE(config.at("eos_token").is_string());
  }
  // libsentencepiece, which Transformers' Llama tokenizers build on, reads
  // the tokenizer.model and gives the same ids.
  if (files.count("tokenizer.model")) {
    auto sp = SentencePieceTokenizer::FromSerializedModel(files.at("tokenizer.model"), gguf);
    ASSERT_TRUE(sp.ok()) << sp.status();
    for (const auto& c : cases) EXPECT_EQ((*sp)->Encode(c.text), c.ids) << "[" << c.text << "]";
    EXPECT_EQ((*sp)->bos_id(), (*original)->bos_id());
    EXPECT_EQ((*sp)->eos_id(), (*original)->eos_id());
  }
}

INSTANTIATE_TEST_SUITE_P(LlamaCppVocabs, HfTokenizerFilesTest,
                         ::testing::Values("llama-spm", "llama-bpe", "gpt-2"));

TEST(HfTokenizerFilesTest, BpeFilesHoldTheVocabularyTheMergesAndTheSpecialTokens) {
  const auto files = WriteFiles("tests/golden/tokenizers/ggml-vocab-llama-bpe.gguf",
                                (fs::path(testing::TempDir()) / "bpe").string());
  ASSERT_EQ(files.count("tokenizer.json"), 1u);
  const auto j = nlohmann::json::parse(files.at("tokenizer.json"));
  EXPECT_EQ(j["model"]["vocab"].size(), 128256u);
  EXPECT_EQ(j["model"]["merges"][0], nlohmann::json::array({"Ġ", "Ġ"}));
  EXPECT_TRUE(j["model"]["ignore_merges"].get<bool>());
  // BOS is added by the post-processor, as Llama 3's own tokenizer.json.
  EXPECT_EQ(j["post_processor"]["type"], "TemplateProcessing");
  EXPECT_EQ(j["post_processor"]["special_tokens"]["<|begin_of_text|>"]["ids"][0], 128000);
  bool found = false;
  for (const auto& t : j["added_tokens"]) {
    if (t["content"] == "<|eot_id|>") found = t["special"].get<bool>() && t["id"] == 128009;
  }
  EXPECT_TRUE(found);
}

// stories260K: the tokenizer.model made from the official GGUF holds the
// pieces, scores and types of the one shipped with the checkpoint.
TEST(HfTokenizerFilesTest, Stories260KModelMatchesTheShippedOne) {
  const auto files = WriteFiles("models/stories260K/stories260K-f32.gguf",
                                (fs::path(testing::TempDir()) / "stories").string());
  auto made = ParseSentencePieceModel(files.at("tokenizer.model"), "made");
  auto shipped =
      ParseSentencePieceModel(ReadVocabFile("models/stories260K/tokenizer.model"), "shipped");
  ASSERT_TRUE(made.ok()) << made.status();
  ASSERT_TRUE(shipped.ok());
  EXPECT_EQ(made->vocab.pieces, shipped->vocab.pieces);
  EXPECT_EQ(made->vocab.scores, shipped->vocab.scores);
  EXPECT_EQ(made->vocab.types, shipped->vocab.types);
  EXPECT_EQ(made->model_type, shipped->model_type);
  EXPECT_EQ(made->byte_fallback, shipped->byte_fallback);
  EXPECT_EQ(made->normalizer_name, shipped->normalizer_name);
  EXPECT_EQ(made->add_dummy_prefix, shipped->add_dummy_prefix);
  EXPECT_EQ(made->remove_extra_whitespaces, shipped->remove_extra_whitespaces);
  EXPECT_EQ(made->escape_whitespaces, shipped->escape_whitespaces);
  EXPECT_EQ(made->unk_id, shipped->unk_id);
  EXPECT_EQ(made->bos_id, shipped->bos_id);
  EXPECT_EQ(made->eos_id, shipped->eos_id);
}

}  // namespace
}  // namespace quantd::io
