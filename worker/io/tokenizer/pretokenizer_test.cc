#include "worker/io/tokenizer/pretokenizer.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/io/tokenizer/byte_level.h"

namespace quantd::io {
namespace {

using ::testing::ElementsAre;

std::vector<std::string> SplitWith(const char* pattern, std::string_view text) {
  auto p = RegexPreTokenizer::Create(pattern);
  EXPECT_TRUE(p.ok()) << p.status();
  std::vector<std::string> out;
  for (auto piece : (*p)->Split(text)) out.emplace_back(piece);
  return out;
}

// Expected splits are those of the original lookahead regexes (Python's
// `regex` module / Hugging Face tokenizers).
TEST(PreTokenizerTest, Gpt2WhitespaceLookahead) {
  EXPECT_THAT(SplitWith(kGpt2Pattern, "Hello world"), ElementsAre("Hello", " world"));
  EXPECT_THAT(SplitWith(kGpt2Pattern, "a   b"), ElementsAre("a", "  ", " b"));
  EXPECT_THAT(SplitWith(kGpt2Pattern, "a \tb"), ElementsAre("a", " ", "\t", "b"));
  EXPECT_THAT(SplitWith(kGpt2Pattern, "a\t\tb"), ElementsAre("a", "\t", "\t", "b"));
  EXPECT_THAT(SplitWith(kGpt2Pattern, "end   "), ElementsAre("end", "   "));
  EXPECT_THAT(SplitWith(kGpt2Pattern, "it's 42!!"), ElementsAre("it", "'s", " 42", "!!"));
  // U+3000 IDEOGRAPHIC SPACE is White_Space (RE2's own \s would miss it).
  EXPECT_THAT(SplitWith(kGpt2Pattern, "a\u3000\u3000b"), ElementsAre("a", "\u3000", "\u3000", "b"));
}

TEST(PreTokenizerTest, Llama3Rules) {
  EXPECT_THAT(SplitWith(kLlama3Pattern, "12345 apples"), ElementsAre("123", "45", " apples"));
  EXPECT_THAT(SplitWith(kLlama3Pattern, "I'VE got\n\n  it"),
              ElementsAre("I", "'VE", " got", "\n\n", " ", " it"));
  EXPECT_THAT(SplitWith(kLlama3Pattern, "(hi)"), ElementsAre("(hi", ")"));
  EXPECT_THAT(SplitWith(kQwen2Pattern, "12345"), ElementsAre("1", "2", "3", "4", "5"));
}

TEST(PreTokenizerTest, TranslationAndRefusals) {
  bool group = false;
  auto t = TranslatePatternForRe2(R"((a)|\s+(?!\S)|\s+)", &group);
  ASSERT_TRUE(t.ok());
  EXPECT_TRUE(group);
  EXPECT_EQ(t->substr(0, 6), "(?:a)|");
  EXPECT_EQ(TranslatePatternForRe2(R"(a(?=b))", &group).status().code(),
            StatusCode::kUnimplemented);
  EXPECT_EQ(TranslatePatternForRe2(R"([\S])", &group).status().code(), StatusCode::kUnimplemented);
  EXPECT_EQ(RegexPreTokenizer::Create("(unclosed").status().code(), StatusCode::kInvalidArgument);
}

TEST(PreTokenizerTest, PatternsFromFilesAreBounded) {
  // Over the length cap: refused before translation.
  const Status too_long = RegexPreTokenizer::Create(std::string(1025, 'a')).status();
  EXPECT_EQ(too_long.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(too_long.message(), "pre-tokenizer pattern is 1025 characters; at most 1024");
  // Short, but a program past max_mem.
  const Status too_big = RegexPreTokenizer::Create(R"(\p{L}{1000}\p{L}{1000}\p{L}{1000})").status();
  EXPECT_EQ(too_big.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(too_big.message().find("pattern too large"), std::string::npos) << too_big;
  // Deep nesting within the cap compiles (RE2's parser has its own stack).
  auto deep = RegexPreTokenizer::Create(std::string(500, '(') + "a" + std::string(500, ')'));
  ASSERT_TRUE(deep.ok()) << deep.status();
  EXPECT_EQ((*deep)->Split("aba"), (std::vector<std::string_view>{"a", "b", "a"}));
  // The known patterns all fit.
  for (const char* p : {kGpt2Pattern, kLlama3Pattern, kQwen2Pattern}) {
    EXPECT_TRUE(RegexPreTokenizer::Create(p).ok()) << p;
  }
}

TEST(ByteLevelTest, Gpt2AlphabetRoundTrips) {
  EXPECT_EQ(BytesToByteLevel(" "), "\xC4\xA0");   // Ġ
  EXPECT_EQ(BytesToByteLevel("\n"), "\xC4\x8A");  // Ċ
  EXPECT_EQ(BytesToByteLevel("a!~"), "a!~");
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  EXPECT_EQ(ByteLevelToBytes(BytesToByteLevel(all)), all);
  EXPECT_EQ(ByteLevelToBytes("<|endoftext|>"), "<|endoftext|>");
}

}  // namespace
}  // namespace quantd::io
