#include "worker/io/tokenizer/gguf_tokenizer.h"

#include <fstream>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/io/tokenizer/sentencepiece_tokenizer.h"
#include "worker/io/tokenizer/vocab_cases.h"

namespace quantd::io {
namespace {

using ::testing::ElementsAre;

class GgufVocabTest : public ::testing::TestWithParam<const char*> {};

TEST_P(GgufVocabTest, GivesExactlyTheExpectedIds) {
  const std::string path =
      std::string("tests/golden/tokenizers/ggml-vocab-") + GetParam() + ".gguf";
  auto tok = LoadTokenizerFromGgufPath(path);
  ASSERT_TRUE(tok.ok()) << tok.status();
  const auto cases = ReadVocabCases(path);
  ASSERT_EQ(cases.size(), 46u);
  int mismatches = 0;
  for (const auto& c : cases) {
    const auto ids = (*tok)->Encode(c.text);
    if (ids != c.ids) ++mismatches;
    EXPECT_EQ(ids, c.ids) << "text: [" << c.text << "]";
    // Decoding gives the text back (SentencePiece keeps leading spaces of
    // the text; only the dummy prefix is dropped).
    EXPECT_EQ((*tok)->Decode(ids), c.text);
  }
  EXPECT_EQ(mismatches, 0);
}

INSTANTIATE_TEST_SUITE_P(LlamaCppVocabs, GgufVocabTest,
                         ::testing::Values("llama-spm", "llama-bpe", "gpt-2"));

TEST(GgufTokenizerTest, SpecialTokensAndFlags) {
  auto spm = LoadTokenizerFromGgufPath("tests/golden/tokenizers/ggml-vocab-llama-spm.gguf");
  ASSERT_TRUE(spm.ok());
  EXPECT_EQ((*spm)->vocab_size(), 32000);
  EXPECT_EQ((*spm)->bos_id(), 1);
  EXPECT_EQ((*spm)->eos_id(), 2);
  EXPECT_TRUE((*spm)->add_bos());
  auto bpe = LoadTokenizerFromGgufPath("tests/golden/tokenizers/ggml-vocab-llama-bpe.gguf");
  ASSERT_TRUE(bpe.ok());
  EXPECT_EQ((*bpe)->vocab_size(), 128256);
  EXPECT_EQ((*bpe)->bos_id(), 128000);
  EXPECT_TRUE((*bpe)->add_bos());
  EXPECT_EQ((*bpe)->Decode({128000, 9906, 1917}), "Hello world");
  auto gpt2 = LoadTokenizerFromGgufPath("tests/golden/tokenizers/ggml-vocab-gpt-2.gguf");
  ASSERT_TRUE(gpt2.ok());
  EXPECT_FALSE((*gpt2)->add_bos());
  EXPECT_EQ((*gpt2)->eos_id(), 50256);
}

// The native SentencePiece BPE on stories260K's GGUF vocabulary agrees with
// libsentencepiece on its tokenizer.model, over real text.
TEST(GgufTokenizerTest, Stories260KMatchesLibSentencePiece) {
  auto native = LoadTokenizerFromGgufPath("models/stories260K/stories260K-f32.gguf");
  ASSERT_TRUE(native.ok()) << native.status();
  auto reference = SentencePieceTokenizer::Load("models/stories260K/tokenizer.model");
  ASSERT_TRUE(reference.ok());
  EXPECT_THAT(
      (*native)->Encode("Once upon a time, there was a little girl named Lily."),
      ElementsAre(403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426));
  const std::string corpus = ReadVocabFile("tests/data/tinystories-sample.txt");
  ASSERT_GT(corpus.size(), 10000u);
  std::istringstream lines(corpus.substr(0, 200000));
  std::string line;
  int compared = 0;
  while (std::getline(lines, line)) {
    ASSERT_EQ((*native)->Encode(line), (*reference)->Encode(line)) << line;
    ++compared;
  }
  EXPECT_GT(compared, 100);
  const std::string odd = "  tabs\tand\u00e9\u4e16 \xF0\x9F\x98\x80 bytes  ";
  EXPECT_EQ((*native)->Encode(odd), (*reference)->Encode(odd));
  EXPECT_EQ((*native)->Decode((*native)->Encode(odd)), odd);
}

TEST(GgufTokenizerTest, ErrorsNameTheProblem) {
  gguf::GgufFile f;
  f.path = "v.gguf";
  EXPECT_THAT(LoadTokenizerFromGguf(f).status().message(),
              ::testing::HasSubstr("tokenizer.ggml.model"));
  f.metadata.emplace_back("tokenizer.ggml.model", gguf::GgufValue::String("bert"));
  f.metadata.emplace_back("tokenizer.ggml.tokens", gguf::GgufValue::StringArray({"a", "b"}));
  EXPECT_EQ(LoadTokenizerFromGguf(f).status().code(), StatusCode::kUnimplemented);
  f.metadata[0].second = gguf::GgufValue::String("gpt2");
  EXPECT_THAT(LoadTokenizerFromGguf(f).status().message(),
              ::testing::HasSubstr("tokenizer.ggml.merges"));
  f.metadata.emplace_back("tokenizer.ggml.merges", gguf::GgufValue::StringArray({"a b"}));
  f.metadata.emplace_back("tokenizer.ggml.pre", gguf::GgufValue::String("deepseek-coder"));
  EXPECT_THAT(LoadTokenizerFromGguf(f).status().message(), ::testing::HasSubstr("deepseek-coder"));
  f.metadata[0].second = gguf::GgufValue::String("llama");
  f.metadata.emplace_back("tokenizer.ggml.scores", gguf::GgufValue::Float32Array({0.0f}));
  EXPECT_THAT(LoadTokenizerFromGguf(f).status().message(),
              ::testing::HasSubstr("tokenizer.ggml.scores has 1 entries for 2 tokens"));
}

}  // namespace
}  // namespace quantd::io
