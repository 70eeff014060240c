#include "client/quantctl/quantctl_args.h"

#include <set>
#include <string>
#include <vector>

#include "client/cli_common/job_spec_flags.h"
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
                                                         "candidates",
                                                         "max-rounds",
                                                         "cost-per-weight",
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
                                   "qat-learn-scales", "auto-precision"}));
}

// `quantctl submit --auto-precision`: the candidates replace the scheme,
// and the budget is the evaluation's gate.
TEST(QuantctlArgsTest, AutoPrecisionFillsTheSpec) {
  auto a = ParseQuantctlArgs({"submit", "--model", "/m/stories", "--auto-precision", "--candidates",
                              "w_uint4_per_group_asym,w_int8_per_channel_sym,float", "--max-rounds",
                              "3", "--max-ppl-increase", "0.02", "--group-size", "32", "--exclude",
                              "*.lm_head"});
  ASSERT_TRUE(a.ok()) << a.status();
  quantd::v1::JobSpec spec;
  ASSERT_TRUE(cli_common::FillJobSpec(*a, &spec).ok());
  ASSERT_TRUE(spec.has_auto_precision());
  EXPECT_EQ(
      std::vector<std::string>(spec.auto_precision().candidates().begin(),
                               spec.auto_precision().candidates().end()),
      (std::vector<std::string>{"w_uint4_per_group_asym", "w_int8_per_channel_sym", "float"}));
  ASSERT_TRUE(spec.auto_precision().has_max_rounds());
  EXPECT_EQ(spec.auto_precision().max_rounds(), 3);
  EXPECT_TRUE(spec.auto_precision().cost_per_weight().empty());
  EXPECT_DOUBLE_EQ(spec.evaluation().max_perplexity_increase(), 0.02);
  // No scheme: the per-layer settings that apply to every candidate stay.
  EXPECT_EQ(spec.quantization().source_case(), quantd::v1::QuantizationSettings::SOURCE_NOT_SET);
  EXPECT_EQ(spec.quantization().group_size(), 32);
  ASSERT_EQ(spec.quantization().exclude_size(), 1);

  // Unset rounds stay unset (the engine's default), and a job without the
  // switch has no search.
  auto b = ParseQuantctlArgs({"submit", "--model", "/m", "--auto-precision", "--candidates",
                              "w_int4_per_channel_sym,float", "--max-kl", "0.01"});
  ASSERT_TRUE(b.ok()) << b.status();
  quantd::v1::JobSpec defaults;
  ASSERT_TRUE(cli_common::FillJobSpec(*b, &defaults).ok());
  EXPECT_EQ(defaults.auto_precision().candidates_size(), 2);
  EXPECT_FALSE(defaults.auto_precision().has_max_rounds());
  EXPECT_TRUE(defaults.auto_precision().cost_per_weight().empty());
  auto c = ParseQuantctlArgs({"submit", "--model", "/m", "--scheme", "w_int8_per_channel_sym"});
  ASSERT_TRUE(c.ok()) << c.status();
  quantd::v1::JobSpec plain;
  ASSERT_TRUE(cli_common::FillJobSpec(*c, &plain).ok());
  EXPECT_FALSE(plain.has_auto_precision());
}

// --cost-per-weight: the user's cost table, one NAME=COST per candidate;
// the search then minimizes the summed cost instead of bytes.
TEST(QuantctlArgsTest, CostPerWeightFillsTheCostTable) {
  auto a = ParseQuantctlArgs({"submit", "--model", "/m/digits_cnn/model.pt", "--auto-precision",
                              "--candidates", "w_uint4_per_group_asym,w_int8_per_channel_sym,float",
                              "--cost-per-weight",
                              "w_uint4_per_group_asym=0.25,w_int8_per_channel_sym=0.4,float=1e1",
                              "--max-accuracy-drop", "0.01"});
  ASSERT_TRUE(a.ok()) << a.status();
  quantd::v1::JobSpec spec;
  ASSERT_TRUE(cli_common::FillJobSpec(*a, &spec).ok());
  const auto& table = spec.auto_precision().cost_per_weight();
  ASSERT_EQ(table.size(), 3u);
  EXPECT_DOUBLE_EQ(table.at("w_uint4_per_group_asym"), 0.25);
  EXPECT_DOUBLE_EQ(table.at("w_int8_per_channel_sym"), 0.4);
  EXPECT_DOUBLE_EQ(table.at("float"), 10.0);
  EXPECT_DOUBLE_EQ(spec.evaluation().max_accuracy_drop(), 0.01);
}

TEST(QuantctlArgsTest, AutoPrecisionUsageErrorsNameTheFlag) {
  const auto fill_error = [](std::vector<std::string> argv) -> std::string {
    auto a = ParseQuantctlArgs(argv);
    if (!a.ok()) return "parse: " + std::string(a.status().message());
    quantd::v1::JobSpec spec;
    quantd::Status s = cli_common::FillJobSpec(*a, &spec);
    return s.ok() ? "ok" : std::string(s.message());
  };
  EXPECT_EQ(fill_error({"submit", "--model", "/m", "--scheme", "w_int8_per_channel_sym",
                        "--candidates", "w_int4_per_channel_sym,float"}),
            "--candidates needs --auto-precision");
  EXPECT_EQ(fill_error({"submit", "--model", "/m", "--scheme", "w_int8_per_channel_sym",
                        "--max-rounds", "3"}),
            "--max-rounds needs --auto-precision");
  EXPECT_EQ(
      fill_error({"submit", "--model", "/m", "--auto-precision=false", "--candidates", "a,b"}),
      "--candidates needs --auto-precision");
  EXPECT_EQ(fill_error({"submit", "--model", "/m", "--auto-precision", "--candidates", "a,b",
                        "--scheme", "w_int8_per_channel_sym"}),
            "--auto-precision takes no --scheme: --candidates are the formats it chooses among");
  EXPECT_EQ(fill_error({"submit", "--model", "/m", "--auto-precision", "--candidates", "a,b",
                        "--config", "/no/such/config.json"}),
            "--auto-precision takes no --config: --candidates are the formats it chooses among");
  EXPECT_EQ(fill_error({"submit", "--model", "/m", "--auto-precision", "--candidates", "a,b",
                        "--gguf-type", "Q4_K_M", "--format", "gguf"}),
            "--auto-precision takes no --gguf-type: --candidates are the formats it chooses "
            "among");
  EXPECT_EQ(fill_error({"submit", "--model", "/m", "--auto-precision", "--candidates", "a,b",
                        "--max-rounds", "many"}),
            "--max-rounds needs an integer, got 'many'");
  EXPECT_EQ(fill_error({"submit", "--model", "/m", "--auto-precision", "--candidates"}),
            "parse: --candidates needs a value");
  // The cost table: only with the search, NAME=COST entries, each cost a
  // positive finite number, each name once.
  EXPECT_EQ(fill_error({"submit", "--model", "/m", "--scheme", "w_int8_per_channel_sym",
                        "--cost-per-weight", "a=1"}),
            "--cost-per-weight needs --auto-precision");
  const auto cost_error = [&](const std::string& table) {
    return fill_error({"submit", "--model", "/m", "--auto-precision", "--candidates", "a,b",
                       "--cost-per-weight", table});
  };
  EXPECT_EQ(cost_error("a=1,b=2"), "ok");
  EXPECT_EQ(cost_error("a=1,b"), "--cost-per-weight 'b' is not NAME=COST");
  EXPECT_EQ(cost_error("a=1,=2"), "--cost-per-weight '=2' is not NAME=COST");
  EXPECT_EQ(cost_error("a=1,,b=2"), "--cost-per-weight '' is not NAME=COST");
  EXPECT_EQ(cost_error(""), "--cost-per-weight '' is not NAME=COST");
  EXPECT_EQ(cost_error("a=1,b=fast"),
            "--cost-per-weight needs a positive number for b, got 'fast'");
  EXPECT_EQ(cost_error("a=1,b="), "--cost-per-weight needs a positive number for b, got ''");
  EXPECT_EQ(cost_error("a=0,b=1"), "--cost-per-weight needs a positive number for a, got '0'");
  EXPECT_EQ(cost_error("a=-2,b=1"), "--cost-per-weight needs a positive number for a, got '-2'");
  EXPECT_EQ(cost_error("a=inf,b=1"), "--cost-per-weight needs a positive number for a, got 'inf'");
  EXPECT_EQ(cost_error("a=nan,b=1"), "--cost-per-weight needs a positive number for a, got 'nan'");
  EXPECT_EQ(cost_error("a=1,b=2,a=3"), "--cost-per-weight names a twice");
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
