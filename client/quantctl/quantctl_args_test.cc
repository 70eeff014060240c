#include "client/quantctl/quantctl_args.h"

#include <set>
#include <string>

#include "gtest/gtest.h"

namespace quantd::quantctl {
namespace {

TEST(QuantctlArgsTest, FlagsKeepOutputFormatAndOutputApart) {
  auto a = ParseQuantctlArgs({"-o", "json", "submit", "--output", "file:///tmp/a", "--wait"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->Get("output-format"), "json");
  EXPECT_EQ(a->Get("output"), "file:///tmp/a");
  EXPECT_EQ(a->Get("wait"), "true");
  auto b = ParseQuantctlArgs({"submit", "--wait=maybe"});
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().message(), "--wait takes true or false");
}

TEST(QuantctlArgsTest, CredentialFlags) {
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

TEST(QuantctlArgsTest, TakesItsOwnFlagsAndEveryJobFlag) {
  EXPECT_EQ(QuantctlValueFlags(), (std::set<std::string>{"server",
                                                         "output-format",
                                                         "out",
                                                         "request-id",
                                                         "state",
                                                         "page-size",
                                                         "view",
                                                         "token",
                                                         "tls-ca",
                                                         "tls-cert",
                                                         "tls-key",
                                                         "tls-server-name",
                                                         "quantctl-config",
                                                         "model",
                                                         "scheme",
                                                         "config",
                                                         "group-size",
                                                         "exclude",
                                                         "calib",
                                                         "calib-samples",
                                                         "calib-seq-len",
                                                         "calib-sampling",
                                                         "calib-seed",
                                                         "calib-dtype",
                                                         "eval",
                                                         "n-ctx",
                                                         "eval-windows",
                                                         "max-ppl-increase",
                                                         "max-kl",
                                                         "max-accuracy-drop",
                                                         "batchnorm-folding",
                                                         "qat-steps",
                                                         "qat-data",
                                                         "qat-lr",
                                                         "qat-batch-size",
                                                         "qat-loss",
                                                         "qat-parameters",
                                                         "qat-seed",
                                                         "sensitivity",
                                                         "format",
                                                         "output",
                                                         "device",
                                                         "label",
                                                         "max-attempts",
                                                         "gguf-float-type",
                                                         "gguf-type",
                                                         "target",
                                                         "algorithm",
                                                         "min-expert-tokens",
                                                         "calib-field",
                                                         "eval-field"}));
  EXPECT_EQ(QuantctlBoolFlags(),
            (std::set<std::string>{"wait", "all", "help", "tls", "allow-plaintext-token",
                                   "overwrite", "no-eval", "fp8-kv-cache", "float-starved-experts",
                                   "qat-learn-scales"}));
}

// Every flag quantctl takes is in its usage (--help aside: `quantctl help`).
TEST(QuantctlArgsTest, UsageListsEveryFlag) {
  const std::string usage = QuantctlUsage();
  std::set<std::string> flags = QuantctlValueFlags();
  flags.insert(QuantctlBoolFlags().begin(), QuantctlBoolFlags().end());
  flags.erase("help");
  for (const std::string& flag : flags) {
    const std::string spelled = "--" + flag;
    bool found = false;
    for (size_t at = usage.find(spelled); at != std::string::npos && !found;
         at = usage.find(spelled, at + 1)) {
      const char next = usage[at + spelled.size()];
      found = next == ' ' || next == ',' || next == ']' || next == '\n';
    }
    EXPECT_TRUE(found) << spelled;
  }
  // The job flags under "submit", in the command's flag column.
  EXPECT_NE(usage.find("\n      --calib-seed N          seed of the random windows"),
            std::string::npos);
  EXPECT_NE(usage.find("\n      --overwrite             replace an existing output\n"
                       "      --device D              cpu, cuda or cuda:N (default any)\n"),
            std::string::npos);
}

}  // namespace
}  // namespace quantd::quantctl
