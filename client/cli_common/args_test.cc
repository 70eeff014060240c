#include "client/cli_common/args.h"

#include "gtest/gtest.h"

namespace quantd::cli_common {
namespace {

TEST(ArgsTest, GlobalFlagsCommandFlagsAndPositionals) {
  auto a = ParseArgs({"--server", "127.0.0.1:9", "-o", "json", "submit", "--model=/m", "--label",
                      "a=1", "--label", "b=2", "--wait", "extra"},
                     {"server", "output-format", "model", "label"}, {"wait"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->command, "submit");
  EXPECT_EQ(a->Get("server"), "127.0.0.1:9");
  EXPECT_EQ(a->Get("output-format"), "json");
  EXPECT_EQ(a->Get("model"), "/m");
  EXPECT_EQ(a->GetAll("label"), (std::vector<std::string>{"a=1", "b=2"}));
  EXPECT_EQ(a->Get("wait"), "true");
  EXPECT_EQ(a->positional, std::vector<std::string>{"extra"});
}

TEST(ArgsTest, UnknownFlagAndMissingValueAreErrors) {
  auto a = ParseArgs({"submit", "--modle", "/m"}, {"model"}, {});
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().message(), "unknown flag --modle");
  auto b = ParseArgs({"submit", "--model"}, {"model"}, {});
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().message(), "--model needs a value");
}

TEST(ArgsTest, IntegerFlags) {
  auto a = ParseArgs({"submit", "--group-size", "32", "--n-ctx", "x"}, {"group-size", "n-ctx"}, {});
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(*a->GetInt("group-size", 128), 32);
  EXPECT_EQ(*a->GetInt("absent", 128), 128);
  EXPECT_FALSE(a->GetInt("n-ctx", 0).ok());
}

}  // namespace
}  // namespace quantd::cli_common
