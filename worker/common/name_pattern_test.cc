#include "worker/common/name_pattern.h"

#include <fnmatch.h>

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace quantd {
namespace {

TEST(GlobMatchTest, AgreesWithFnmatch) {
  const std::vector<std::string> patterns = {
      "*",          "lm_head",        "*down_proj",   "model.layers.?.mlp.*", "*.[0-3].*",
      "*.[!0-3].*", "*.[^0-3].*",     "*[]]*",        "*[!]]*",               "[a-]*",
      "*\\*",       "*\\",            "a[",           "*[",                   "*[[:digit:]]*",
      "*[[:bogus:]]*", "**q_proj",    "?",            "",                     "model.*.q_*",
      "*[a-c-e]*",  "\\?x",           "*[\\]]*",      "*.*.*"};
  const std::vector<std::string> names = {
      "",        "lm_head", "model.layers.0.mlp.down_proj", "model.layers.7.self_attn.q_proj",
      "a]b",     "a-",      "x*",                           "x\\",
      "a[",      "?x",      "model.layers.12.mlp.up_proj",  "e",
      "b",       "[",       "qq_proj"};
  for (const std::string& p : patterns) {
    for (const std::string& n : names) {
      EXPECT_EQ(GlobMatch(p, n), ::fnmatch(p.c_str(), n.c_str(), 0) == 0)
          << "pattern '" << p << "' name '" << n << "'";
    }
  }
}

TEST(GlobMatchTest, ManyStarsStayLinear) {
  // glibc's fnmatch backtracks on every '*': this takes it exponential time.
  std::string pattern;
  for (int i = 0; i < 500; ++i) pattern += "*a";
  pattern += "b";
  const std::string name(200, 'a');
  EXPECT_FALSE(GlobMatch(pattern, name));
  EXPECT_TRUE(GlobMatch(pattern.substr(0, 100), name));
}

TEST(CheckGlobTest, LengthCap) {
  EXPECT_TRUE(CheckGlob(std::string(kMaxPatternLength, '*')).ok());
  const Status s = CheckGlob(std::string(kMaxPatternLength + 1, '*'));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "the glob is 1025 characters; at most 1024");
}

TEST(RegexTest, MatchesAtTheStartLikePythonReMatch) {
  EXPECT_TRUE(RegexMatchesPrefix(".*self_attn.*", "model.layers.0.self_attn.q_proj"));
  EXPECT_TRUE(RegexMatchesPrefix("model\\.layers\\.[0-9]+", "model.layers.10.mlp"));
  EXPECT_FALSE(RegexMatchesPrefix("layers", "model.layers.0"));  // not a search
  EXPECT_FALSE(RegexMatchesPrefix("(", "anything"));             // invalid: matches nothing
}

TEST(RegexTest, BacktrackingPatternRunsInLinearTime) {
  // Exponential under std::regex / PCRE; RE2 answers at once.
  const std::string re = "(?:[a-z0-9_.]|[a-z0-9_.])*!";
  ASSERT_TRUE(CheckRegex(re).ok());
  const std::string name(100000, 'a');
  EXPECT_FALSE(RegexMatchesPrefix(re, name));
  EXPECT_TRUE(RegexMatchesPrefix(re, name + "!"));
}

TEST(RegexTest, DeepNestingIsRefusedOrBounded) {
  // 100 000 levels: over the length cap, refused before RE2 sees it.
  const std::string deep = std::string(100000, '(') + "a" + std::string(100000, ')');
  const Status s = CheckRegex(deep);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "the regular expression is 200001 characters; at most 1024");
  EXPECT_FALSE(RegexMatchesPrefix(deep, "a"));
  // The deepest pattern within the cap compiles (RE2's parser keeps its own
  // stack) and matches.
  const std::string within = std::string(511, '(') + "a" + std::string(511, ')');
  ASSERT_TRUE(CheckRegex(within).ok());
  EXPECT_TRUE(RegexMatchesPrefix(within, "abc"));
}

TEST(RegexTest, ProgramSizeIsBounded) {
  // Short, but compiles to a program far over max_mem.
  const Status s = CheckRegex("\\pL{1000}\\pL{1000}\\pL{1000}");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("RE2: pattern too large"), std::string::npos) << s;
  EXPECT_NE(s.message().find("exceeds 1024 KiB"), std::string::npos) << s;
}

TEST(RegexTest, UnsupportedSyntaxIsAnError) {
  const Status back = CheckRegex("(a)\\1");
  EXPECT_EQ(back.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(back.message().find("'(a)\\1' is not a valid regular expression (RE2: "),
            std::string::npos)
      << back;
  EXPECT_FALSE(CheckRegex("a(?=b)").ok());
}

}  // namespace
}  // namespace quantd
