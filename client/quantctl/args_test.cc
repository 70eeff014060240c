#include "client/quantctl/args.h"

#include "gtest/gtest.h"

namespace quantd::quantctl {
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

TEST(ArgsTest, QuantctlFlagsKeepOutputFormatAndOutputApart) {
  auto a = ParseQuantctlArgs({"-o", "json", "submit", "--output", "file:///tmp/a", "--wait"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->Get("output-format"), "json");
  EXPECT_EQ(a->Get("output"), "file:///tmp/a");
  EXPECT_EQ(a->Get("wait"), "true");
  auto b = ParseQuantctlArgs({"submit", "--wait=maybe"});
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().message(), "--wait takes true or false");
}

TEST(ArgsTest, QuantctlCredentialFlags) {
  auto a = ParseQuantctlArgs({"--token", "t0k", "--tls", "--tls-ca=ca.pem", "--tls-cert", "me.pem",
                              "--tls-key", "me.key", "--tls-server-name", "q.internal",
                              "--quantctl-config", "/etc/q.json", "list"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->command, "list");
  EXPECT_EQ(a->Get("token"), "t0k");
  EXPECT_EQ(a->Get("tls"), "true");
  EXPECT_EQ(a->Get("tls-ca"), "ca.pem");
  EXPECT_EQ(a->Get("tls-cert"), "me.pem");
  EXPECT_EQ(a->Get("tls-key"), "me.key");
  EXPECT_EQ(a->Get("tls-server-name"), "q.internal");
  EXPECT_EQ(a->Get("quantctl-config"), "/etc/q.json");
  EXPECT_TRUE(a->positional.empty());
  auto b = ParseQuantctlArgs({"list", "--token"});
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().message(), "--token needs a value");
}

}  // namespace
}  // namespace quantd::quantctl
