#include "worker/cli/quantize_args.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <fstream>
#include <set>
#include <string>

namespace quantd::cli {
namespace {

quantd::StatusOr<quantd::v1::Job> Job(const std::vector<std::string>& argv) {
  auto a = ParseQuantizeArgs(argv);
  if (!a.ok()) return a.status();
  return BuildJob(*a, "local-1");
}

TEST(QuantizeArgsTest, EveryFlagLandsInTheSpecAsQuantctlSubmitPutsIt) {
  auto job = Job({"--model",
                  "/m/stories",
                  "--scheme",
                  "w_int4_per_group_sym",
                  "--group-size",
                  "32",
                  "--exclude",
                  "*.lm_head",
                  "--exclude",
                  "*.w3",
                  "--fp8-kv-cache",
                  "--calib",
                  "/d/calib.txt",
                  "--calib-samples",
                  "16",
                  "--calib-seq-len",
                  "64",
                  "--calib-sampling",
                  "random-windows",
                  "--calib-seed",
                  "11",
                  "--eval",
                  "file:///d/eval.txt",
                  "--n-ctx",
                  "128",
                  "--eval-windows",
                  "20",
                  "--max-ppl-increase",
                  "0.05",
                  "--max-kl=0.25",
                  "--output",
                  "/o/out",
                  "--format",
                  "gguf",
                  "--format",
                  "hf-quark",
                  "--overwrite",
                  "--device",
                  "cpu"});
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->name(), "jobs/local-1");
  EXPECT_EQ(job->state(), quantd::v1::QUEUED);
  const auto& s = job->spec();
  EXPECT_EQ(s.model_uri(), "file:///m/stories");
  EXPECT_EQ(s.quantization().scheme(), "w_int4_per_group_sym");
  EXPECT_EQ(s.quantization().group_size(), 32);
  ASSERT_EQ(s.quantization().exclude_size(), 2);
  EXPECT_EQ(s.quantization().exclude(1), "*.w3");
  EXPECT_TRUE(s.quantization().fp8_kv_cache());
  EXPECT_EQ(s.calibration().dataset_uri(), "file:///d/calib.txt");
  EXPECT_EQ(s.calibration().num_samples(), 16);
  EXPECT_EQ(s.calibration().seq_len(), 64);
  EXPECT_EQ(s.calibration().sampling(), quantd::v1::RANDOM_WINDOWS);
  EXPECT_EQ(s.calibration().seed(), 11u);
  EXPECT_EQ(s.evaluation().dataset_uri(), "file:///d/eval.txt");
  EXPECT_EQ(s.evaluation().n_ctx(), 128);
  EXPECT_EQ(s.evaluation().max_windows(), 20);
  EXPECT_DOUBLE_EQ(s.evaluation().max_perplexity_increase(), 0.05);
  EXPECT_DOUBLE_EQ(s.evaluation().max_kl_divergence(), 0.25);
  EXPECT_EQ(s.export_().output_uri(), "file:///o/out");
  ASSERT_EQ(s.export_().formats_size(), 2);
  EXPECT_EQ(s.export_().formats(0), quantd::v1::GGUF);
  EXPECT_EQ(s.export_().formats(1), quantd::v1::HF_QUARK);
  EXPECT_TRUE(s.export_().overwrite());
  EXPECT_EQ(s.device(), "cpu");
}

TEST(QuantizeArgsTest, DefaultsLeaveOptionalFieldsUnset) {
  auto job = Job({"--model", "/m", "--scheme", "w_int8_per_channel_sym"});
  ASSERT_TRUE(job.ok()) << job.status();
  const auto& s = job->spec();
  EXPECT_FALSE(s.quantization().has_group_size());
  EXPECT_FALSE(s.has_calibration());
  EXPECT_FALSE(s.evaluation().has_n_ctx());
  EXPECT_FALSE(s.evaluation().has_max_perplexity_increase());
  EXPECT_FALSE(s.evaluation().disabled());
  EXPECT_EQ(s.export_().formats_size(), 0);
  EXPECT_FALSE(s.export_().overwrite());
  EXPECT_EQ(s.device(), "cpu");
}

TEST(QuantizeArgsTest, RelativePathsBecomeAbsoluteFileUris) {
  char cwd[PATH_MAX];
  ASSERT_NE(getcwd(cwd, sizeof(cwd)), nullptr);
  EXPECT_EQ(ToUri("models/x/"), std::string("file://") + cwd + "/models/x");
  EXPECT_EQ(ToUri("hf://org/model"), "hf://org/model");
  EXPECT_EQ(ToUri(""), "");
}

TEST(QuantizeArgsTest, ConfigFileBecomesQuarkJson) {
  const std::string path = ::testing::TempDir() + "/qcfg.json";
  std::ofstream(path) << R"({"quant_method": "quark"})";
  auto job = Job({"--model", "/m", "--config", path});
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->spec().quantization().quark_json(), R"({"quant_method": "quark"})");
  auto missing = Job({"--model", "/m", "--config", path + ".absent"});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find(path + ".absent"), std::string::npos);
}

TEST(QuantizeArgsTest, MistakesNameTheFlag) {
  auto both = Job({"--model", "/m", "--scheme", "a", "--config", "b"});
  ASSERT_FALSE(both.ok());
  EXPECT_NE(both.status().message().find("exactly one of --scheme"), std::string::npos);
  auto no_model = Job({"--scheme", "a"});
  ASSERT_FALSE(no_model.ok());
  EXPECT_NE(no_model.status().message().find("--model"), std::string::npos);
  auto bad_int = Job({"--model", "/m", "--scheme", "a", "--n-ctx", "big"});
  ASSERT_FALSE(bad_int.ok());
  EXPECT_NE(bad_int.status().message().find("--n-ctx"), std::string::npos);
  auto bad_float = Job({"--model", "/m", "--scheme", "a", "--max-kl", "x"});
  ASSERT_FALSE(bad_float.ok());
  EXPECT_NE(bad_float.status().message().find("--max-kl"), std::string::npos);
  auto bad_format = Job({"--model", "/m", "--scheme", "a", "--format", "tflite"});
  ASSERT_FALSE(bad_format.ok());
  EXPECT_NE(bad_format.status().message().find("'tflite'"), std::string::npos);
  auto unknown = ParseQuantizeArgs({"--model", "/m", "--label", "a=b"});
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("--label"), std::string::npos);
  auto positional = ParseQuantizeArgs({"submit", "--model", "/m"});
  ASSERT_FALSE(positional.ok());
  EXPECT_NE(positional.status().message().find("'submit'"), std::string::npos);
}

// The auto-precision search with a cost table, as `quantctl submit` takes it.
TEST(QuantizeArgsTest, AutoPrecisionTakesTheCostTable) {
  auto job = Job({"--model", "/m/model.pt", "--auto-precision", "--candidates",
                  "w_uint4_per_group_asym,float", "--cost-per-weight",
                  "w_uint4_per_group_asym=0.25,float=1", "--max-accuracy-drop", "0.01"});
  ASSERT_TRUE(job.ok()) << job.status();
  const auto& search = job->spec().auto_precision();
  ASSERT_EQ(search.candidates_size(), 2);
  ASSERT_EQ(search.cost_per_weight().size(), 2u);
  EXPECT_DOUBLE_EQ(search.cost_per_weight().at("w_uint4_per_group_asym"), 0.25);
  EXPECT_DOUBLE_EQ(search.cost_per_weight().at("float"), 1.0);
  auto without = Job({"--model", "/m", "--scheme", "a", "--cost-per-weight", "a=1"});
  ASSERT_FALSE(without.ok());
  EXPECT_EQ(without.status().message(), "--cost-per-weight needs --auto-precision");
  auto twice = Job({"--model", "/m", "--auto-precision", "--candidates", "a,float",
                    "--cost-per-weight", "a=1,float=2,float=3"});
  ASSERT_FALSE(twice.ok());
  EXPECT_EQ(twice.status().message(), "--cost-per-weight names float twice");
}

TEST(QuantizeArgsTest, RunOptions) {
  auto a = ParseQuantizeArgs({"-o", "json", "--threads", "3", "--device", "cuda:1", "--data-dir",
                              "/tmp/q", "--keep-scratch"});
  ASSERT_TRUE(a.ok()) << a.status();
  auto o = BuildRunOptions(*a);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_TRUE(o->json);
  EXPECT_EQ(o->threads, 3);
  EXPECT_EQ(o->device, "cuda:1");
  EXPECT_EQ(o->data_dir, "/tmp/q");
  EXPECT_TRUE(o->keep_scratch);
  auto defaults = BuildRunOptions(*ParseQuantizeArgs({}));
  ASSERT_TRUE(defaults.ok());
  EXPECT_FALSE(defaults->json);
  EXPECT_EQ(defaults->device, "cpu");
  EXPECT_EQ(defaults->threads, 0);
  EXPECT_EQ(defaults->data_dir, "./quantd-data");
  auto bad = BuildRunOptions(*ParseQuantizeArgs({"-o", "yaml"}));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("-o"), std::string::npos);
  auto negative = BuildRunOptions(*ParseQuantizeArgs({"--threads", "-1"}));
  EXPECT_FALSE(negative.ok());
}

TEST(QuantizeArgsTest, TakesTheSharedJobFlagsAndItsLocalRunFlags) {
  EXPECT_EQ(QuantizeValueFlags(), (std::set<std::string>{"model",
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
                                                         "output",
                                                         "format",
                                                         "device",
                                                         "threads",
                                                         "output-format",
                                                         "data-dir",
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
                                                         "activation-offload",
                                                         "gguf-float-type",
                                                         "gguf-type",
                                                         "target",
                                                         "algorithm",
                                                         "min-expert-tokens",
                                                         "calib-field",
                                                         "eval-field"}));
  EXPECT_EQ(QuantizeBoolFlags(),
            (std::set<std::string>{"overwrite", "no-eval", "fp8-kv-cache", "float-starved-experts",
                                   "qat-learn-scales", "keep-scratch", "help", "auto-precision"}));
  // A served job's fields that a local run has no use for.
  for (const char* flag : {"--label", "--max-attempts", "--request-id", "--wait"}) {
    auto a = ParseQuantizeArgs({"--model", "/m", "--scheme", "x", flag, "1"});
    EXPECT_FALSE(a.ok()) << flag;
  }
}

// Every flag is in --help (--help aside), the job flags at the top level.
TEST(QuantizeArgsTest, UsageListsEveryFlag) {
  const std::string usage = QuantizeUsage();
  std::set<std::string> flags = QuantizeValueFlags();
  flags.insert(QuantizeBoolFlags().begin(), QuantizeBoolFlags().end());
  flags.erase("help");
  for (const std::string& flag : flags) {
    const std::string spelled = "\n  --" + flag + " ";
    const std::string aliased = "\n  -o, --" + flag + " ";
    EXPECT_TRUE(usage.find(spelled) != std::string::npos ||
                usage.find(aliased) != std::string::npos)
        << flag;
  }
  EXPECT_NE(usage.find("job (the same flags as `quantctl submit`):\n"
                       "  --model URI             model directory"),
            std::string::npos);
  EXPECT_NE(usage.find("  --overwrite             replace an existing output\n\nlocal run:\n"),
            std::string::npos);
}

}  // namespace
}  // namespace quantd::cli
