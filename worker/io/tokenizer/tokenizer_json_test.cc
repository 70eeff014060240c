#include "worker/io/tokenizer/tokenizer_json.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/io/gguf/gguf_file.h"
#include "worker/io/tokenizer/load_tokenizer.h"
#include "worker/io/tokenizer/pretokenizer.h"

namespace quantd::io {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::pair<std::string, std::vector<int32_t>>> ReadVocabCases(const std::string& gguf) {
  const std::string inp = ReadFile(gguf + ".inp");
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::istringstream out(ReadFile(gguf + ".out"));
  std::vector<std::pair<std::string, std::vector<int32_t>>> cases;
  for (size_t pos = 0, end; (end = inp.find(sep, pos)) != std::string::npos;
       pos = end + sep.size()) {
    std::string line;
    std::getline(out, line);
    std::istringstream ids(line);
    std::vector<int32_t> v;
    int32_t id;
    while (ids >> id) v.push_back(id);
    cases.emplace_back(inp.substr(pos, end - pos), v);
  }
  return cases;
}

// Writes a tokenizer.json in Hugging Face's schema from a GGUF vocabulary:
// GPT-2 style (ByteLevel pre-tokenizer with its regex) or Llama-3 style
// (Split regex + ByteLevel, ignore_merges, a BOS template). Control tokens
// become special added tokens. Merges use the newer [a, b] form for Llama 3.
json TokenizerJsonFromGguf(const std::string& gguf_path, bool llama3) {
  auto f = gguf::ReadGgufFile(gguf_path);
  EXPECT_TRUE(f.ok()) << f.status();
  const auto tokens = *f->GetStringArray("tokenizer.ggml.tokens");
  const auto merges = *f->GetStringArray("tokenizer.ggml.merges");
  const auto types = *f->GetIntArray("tokenizer.ggml.token_type");
  json vocab = json::object();
  json added = json::array();
  for (size_t id = 0; id < tokens.size(); ++id) {
    if (types[id] == 3) {
      added.push_back({{"id", id},
                       {"content", tokens[id]},
                       {"single_word", false},
                       {"lstrip", false},
                       {"rstrip", false},
                       {"normalized", false},
                       {"special", true}});
    } else {
      vocab[tokens[id]] = id;
    }
  }
  json merge_list = json::array();
  for (const auto& m : merges) {
    if (llama3) {
      const size_t sp = m.find(' ', 1);
      merge_list.push_back(json::array({m.substr(0, sp), m.substr(sp + 1)}));
    } else {
      merge_list.push_back(m);
    }
  }
  json root;
  root["version"] = "1.0";
  root["truncation"] = nullptr;
  root["padding"] = nullptr;
  root["added_tokens"] = added;
  root["normalizer"] = nullptr;
  json byte_level = {{"type", "ByteLevel"},
                     {"add_prefix_space", false},
                     {"trim_offsets", true},
                     {"use_regex", !llama3}};
  if (llama3) {
    json split = json::parse(R"({"type": "Split", "behavior": "Isolated", "invert": false})");
    split["pattern"]["Regex"] = std::string(kLlama3Pattern);
    root["pre_tokenizer"]["type"] = "Sequence";
    root["pre_tokenizer"]["pretokenizers"] = json::array();
    root["pre_tokenizer"]["pretokenizers"].push_back(split);
    root["pre_tokenizer"]["pretokenizers"].push_back(byte_level);
    root["post_processor"] = json::parse(R"({"type": "Sequence", "processors": [
        {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false, "use_regex": true},
        {"type": "TemplateProcessing",
         "single": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}},
                    {"Sequence": {"id": "A", "type_id": 0}}],
         "special_tokens": {"<|begin_of_text|>": {"id": "<|begin_of_text|>", "ids": [128000],
                                                  "tokens": ["<|begin_of_text|>"]}}}]})");
  } else {
    root["pre_tokenizer"] = byte_level;
    root["post_processor"] = byte_level;
  }
  root["decoder"] = {{"type", "ByteLevel"},
                     {"add_prefix_space", true},
                     {"trim_offsets", true},
                     {"use_regex", true}};
  root["model"] = {{"type", "BPE"},
                   {"dropout", nullptr},
                   {"unk_token", nullptr},
                   {"continuing_subword_prefix", ""},
                   {"end_of_word_suffix", ""},
                   {"fuse_unk", false},
                   {"byte_fallback", false},
                   {"ignore_merges", llama3},
                   {"vocab", vocab},
                   {"merges", merge_list}};
  return root;
}

class TokenizerJsonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = getenv("TEST_TMPDIR");
    dir_ = fs::path(tmp ? tmp : "/tmp") /
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name, std::ios::binary) << text;
  }
  fs::path dir_;
};

TEST_F(TokenizerJsonTest, Gpt2TokenizerJsonGivesTheGoldenIds) {
  const std::string gguf = "tests/golden/tokenizers/ggml-vocab-gpt-2.gguf";
  Write("tokenizer.json", TokenizerJsonFromGguf(gguf, /*llama3=*/false).dump());
  auto tok = LoadTokenizerFromDir(dir_.string());
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_FALSE((*tok)->add_bos());
  EXPECT_EQ((*tok)->vocab_size(), 50257);
  const auto cases = ReadVocabCases(gguf);
  ASSERT_EQ(cases.size(), 46u);
  for (const auto& [text, ids] : cases) {
    EXPECT_EQ((*tok)->Encode(text), ids) << "[" << text << "]";
    EXPECT_EQ((*tok)->Decode(ids), text);
  }
  // Added tokens are split out of the text, as Hugging Face does.
  EXPECT_THAT((*tok)->Encode("Hello<|endoftext|> world"), ElementsAre(15496, 50256, 995));
}

TEST_F(TokenizerJsonTest, Llama3TokenizerJsonGivesTheGoldenIds) {
  const std::string gguf = "tests/golden/tokenizers/ggml-vocab-llama-bpe.gguf";
  Write("tokenizer.json", TokenizerJsonFromGguf(gguf, /*llama3=*/true).dump());
  Write("tokenizer_config.json",
        R"({"bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>"})");
  auto tok = LoadTokenizerFromDir(dir_.string());
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_TRUE((*tok)->add_bos());
  EXPECT_EQ((*tok)->bos_id(), 128000);
  EXPECT_EQ((*tok)->eos_id(), 128001);
  const auto cases = ReadVocabCases(gguf);
  ASSERT_EQ(cases.size(), 46u);
  for (const auto& [text, ids] : cases) {
    EXPECT_EQ((*tok)->Encode(text), ids) << "[" << text << "]";
  }
  // Special tokens are left out of decoded text.
  EXPECT_EQ((*tok)->Decode({128000, 9906, 1917}), "Hello world");

  // tokenizer_config.json can turn BOS off.
  Write("tokenizer_config.json", R"({"add_bos_token": false})");
  auto no_bos = LoadTokenizerFromDir(dir_.string());
  ASSERT_TRUE(no_bos.ok());
  EXPECT_FALSE((*no_bos)->add_bos());
  EXPECT_EQ((*no_bos)->bos_id(), 128000);
}

// A Qwen2-style file: NFC normalizer and single-digit regex, on a toy vocab.
TEST_F(TokenizerJsonTest, Qwen2NormalizerAndDigitsOnAToyVocab) {
  json vocab = json::object();
  const std::vector<std::string> toks = {
      "1",        "2",        "3", "\xC3\xA9" /* é as 2 byte-level chars */,
      "\xC3\x83", "\xC2\xA9", "a", "\xC4\xA0"};
  for (size_t i = 0; i < toks.size(); ++i) vocab[toks[i]] = i;
  vocab["\xC3\x83\xC2\xA9"] = 8;  // "Ã©": the byte-level spelling of U+00E9
  json root = json::parse(R"({
      "added_tokens": [{"id": 9, "content": "<|im_end|>", "special": true, "lstrip": true,
                        "rstrip": true}],
      "normalizer": {"type": "NFC"},
      "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
          {"type": "Split", "behavior": "Isolated", "invert": false},
          {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}]},
      "model": {"type": "BPE"}})");
  root["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = std::string(kQwen2Pattern);
  root["model"]["vocab"] = vocab;
  root["model"]["merges"] = json::array({"\xC3\x83 \xC2\xA9"});
  auto tok = ParseTokenizerJson(root.dump(), {}, "qwen.json");
  ASSERT_TRUE(tok.ok()) << tok.status();
  // "e" + COMBINING ACUTE composes to U+00E9 under NFC, then merges.
  EXPECT_THAT((*tok)->Encode("123e\xCC\x81"), ElementsAre(0, 1, 2, 8));
  EXPECT_THAT((*tok)->Encode("1 <|im_end|> 2"), ElementsAre(0, 9, 1));
  EXPECT_EQ((*tok)->vocab_size(), 10);
}

TEST_F(TokenizerJsonTest, RefusesWhatItCannotDo) {
  auto code = [](const std::string& text) {
    return ParseTokenizerJson(text, {}, "t.json").status();
  };
  EXPECT_EQ(code("{nope").code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(code(R"({"model": {"type": "WordPiece", "vocab": {"a": 0}}})").message(),
              HasSubstr("WordPiece"));
  EXPECT_THAT(code(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
                       "pre_tokenizer": {"type": "Metaspace"}})")
                  .message(),
              HasSubstr("Metaspace"));
  EXPECT_THAT(code(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [],
                       "byte_fallback": true}})")
                  .message(),
              HasSubstr("byte_fallback"));
  EXPECT_THAT(code(R"({"model": {"type": "BPE", "vocab": {"a": -4}, "merges": []},
                       "pre_tokenizer": {"type": "ByteLevel"}})")
                  .message(),
              HasSubstr("invalid id"));
  EXPECT_THAT(code(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [7]},
                       "pre_tokenizer": {"type": "ByteLevel"}})")
                  .message(),
              HasSubstr("merge"));
  EXPECT_THAT(code(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
                       "pre_tokenizer": {"type": "ByteLevel"}, "normalizer": {"type": "NFKC"}})")
                  .message(),
              HasSubstr("NFKC"));
  EXPECT_EQ(code(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
                     "pre_tokenizer": {"type": "ByteLevel"}, "added_tokens": [{"id": 1}]})")
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
                     "pre_tokenizer": {"type": "ByteLevel"}, "added_tokens": 5})")
                .code(),
            StatusCode::kInvalidArgument);
}

TEST_F(TokenizerJsonTest, HostileFilesAreRefusedBeforeParsing) {
  const std::string deep = std::string(300000, '[') + std::string(300000, ']');
  auto nested = ParseTokenizerJson(R"({"model": {"type": "BPE", "merges": )" + deep + "}}", {},
                                   "/m/tokenizer.json");
  EXPECT_EQ(nested.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(nested.status().message(), "/m/tokenizer.json nests 300002 levels deep; at most 64");

  auto huge = ParseTokenizerJson(std::string((64 << 20) + 1, ' '), {}, "/m/tokenizer.json");
  EXPECT_EQ(huge.status().message(), "/m/tokenizer.json is 67108865 bytes; at most 67108864");

  // A Split pattern from the file: length-capped before RE2 sees it.
  const std::string split = R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
      "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "behavior": "Isolated", "invert": false, "pattern": {"Regex": ")" +
                            std::string(2000, '(') + std::string(2000, ')') + R"("}},
        {"type": "ByteLevel", "use_regex": false}]}})";
  auto long_pattern = ParseTokenizerJson(split, {}, "/m/tokenizer.json");
  EXPECT_EQ(long_pattern.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(long_pattern.status().message(),
              HasSubstr("pre-tokenizer pattern is 4000 characters; at most 1024"));
}

}  // namespace
}  // namespace quantd::io
