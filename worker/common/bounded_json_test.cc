#include "worker/common/bounded_json.h"

#include <sstream>
#include <string>

#include "gtest/gtest.h"

namespace quantd {
namespace {

std::string Nested(int depth) { return std::string(depth, '[') + std::string(depth, ']'); }

TEST(JsonNestingDepthTest, CountsContainersNotStrings) {
  EXPECT_EQ(JsonNestingDepth(""), 0);
  EXPECT_EQ(JsonNestingDepth("1"), 0);
  EXPECT_EQ(JsonNestingDepth("[]"), 1);
  EXPECT_EQ(JsonNestingDepth(R"({"a":[{"b":[]}], "c":{}})"), 4);
  // Brackets inside strings, escaped quotes included, do not count.
  EXPECT_EQ(JsonNestingDepth(R"(["[[[[", "\"[[[", "\\"])"), 1);
  EXPECT_EQ(JsonNestingDepth(Nested(300000)), 300000);
}

TEST(JsonNestingDepthTest, StrayClosersDoNotHideOpeners) {
  EXPECT_EQ(JsonNestingDepth("]]]]]]" + std::string(70, '[')), 70);
}

TEST(CheckJsonBoundsTest, NamesTheLimitAndTheMeasuredValue) {
  const JsonBounds bounds{1 << 20, 64};
  EXPECT_TRUE(CheckJsonBounds(Nested(64), bounds, "config.json").ok());
  const Status deep = CheckJsonBounds(Nested(65), bounds, "config.json");
  EXPECT_EQ(deep.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(deep.message(), "config.json nests 65 levels deep; at most 64");

  const Status big =
      CheckJsonBounds(std::string(2000, ' '), JsonBounds{1000, 64}, "tokenizer.json",
                      StatusCode::kDataLoss);
  EXPECT_EQ(big.code(), StatusCode::kDataLoss);
  EXPECT_EQ(big.message(), "tokenizer.json is 2000 bytes; at most 1000");
}

TEST(ParseBoundedJsonTest, RefusesDeepInputWithoutCrashing) {
  // 300 000 '[' with a key in front: the shape of the issue's crash.
  const std::string text = R"({"unknown": )" + Nested(300000) + "}";
  auto j = ParseBoundedJson(text, JsonBounds{1 << 20}, "quark_json");
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.status().message(), "quark_json nests 300001 levels deep; at most 64");
}

TEST(ParseBoundedJsonTest, SizeIsCheckedBeforeDepth) {
  auto j = ParseBoundedJson(Nested(300000), JsonBounds{1000}, "x.json");
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.status().message(), "x.json is 600000 bytes; at most 1000");
}

TEST(ParseBoundedJsonTest, ParsesWithinLimits) {
  auto j = ParseBoundedJson<nlohmann::ordered_json>(R"({"b": 1, "a": [[2]]})", JsonBounds{100},
                                                    "x.json");
  ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_EQ(j->begin().key(), "b");  // ordered
  EXPECT_EQ((*j)["a"][0][0], 2);
  // The deepest accepted value copies and dumps (recursively) without trouble.
  auto deep = ParseBoundedJson(Nested(kMaxJsonDepth), JsonBounds{1000}, "x.json");
  ASSERT_TRUE(deep.ok());
  const nlohmann::json copy = *deep;
  EXPECT_EQ(copy.dump(), Nested(kMaxJsonDepth));
}

TEST(ParseBoundedJsonTest, InvalidJsonIsTheGivenCode) {
  auto j = ParseBoundedJson("{\"a\": ", JsonBounds{100}, "index.json", StatusCode::kDataLoss);
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(j.status().message(), "index.json: not valid JSON");
}

TEST(ReadAtMostTest, StopsOneBytePastTheLimit) {
  std::istringstream small("abc");
  EXPECT_EQ(ReadAtMost(small, 10), "abc");
  std::istringstream exact(std::string(10, 'x'));
  EXPECT_EQ(ReadAtMost(exact, 10), std::string(10, 'x'));
  std::istringstream big(std::string(3 << 20, 'y'));
  const std::string head = ReadAtMost(big, (1 << 20) + 5);
  EXPECT_EQ(head.size(), (1u << 20) + 6);
  EXPECT_EQ(CheckJsonBounds(head, JsonBounds{(1 << 20) + 5}, "f").message(),
            "f is 1048582 bytes; at most 1048581");
}

}  // namespace
}  // namespace quantd
