#include "client/cli_common/job_spec_flags.h"

#include <unistd.h>

#include <climits>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gtest/gtest.h"

namespace quantd::cli_common {
namespace {

// The job flags as `quantctl submit` takes them: the shared ones, and the
// three FillJobSpec reads where the caller takes them.
quantd::StatusOr<ParsedArgs> ParseSubmitArgs(const std::vector<std::string>& argv) {
  std::set<std::string> value_flags = JobSpecValueFlags();
  value_flags.insert({"device", "label", "max-attempts"});
  return ParseArgs(argv, value_flags, JobSpecBoolFlags());
}

quantd::v1::JobSpec Fill(const std::vector<std::string>& argv, quantd::Status* status = nullptr) {
  auto args = ParseSubmitArgs(argv);
  EXPECT_TRUE(args.ok()) << args.status();
  quantd::v1::JobSpec spec;
  quantd::Status s = FillJobSpec(*args, &spec);
  if (status != nullptr)
    *status = s;
  else
    EXPECT_TRUE(s.ok()) << s;
  return spec;
}

TEST(JobSpecFlagsTest, EveryJobFlagLandsInItsSpecField) {
  char cwd[PATH_MAX];
  ASSERT_NE(getcwd(cwd, sizeof(cwd)), nullptr);
  const auto spec = Fill({"submit",
                          "--model",
                          "models/m/",
                          "--scheme",
                          "w_int8_per_channel_sym",
                          "--group-size",
                          "64",
                          "--exclude",
                          "*down_proj",
                          "--fp8-kv-cache",
                          "--calib",
                          "/data/c.parquet",
                          "--calib-field",
                          "messages",
                          "--calib-samples",
                          "16",
                          "--calib-seq-len",
                          "128",
                          "--eval",
                          "hf://datasets/org/eval?split=test",
                          "--eval-field",
                          "content",
                          "--n-ctx",
                          "512",
                          "--eval-windows",
                          "9",
                          "--max-ppl-increase",
                          "0.02",
                          "--max-kl",
                          "0.5",
                          "--format",
                          "gguf",
                          "--format",
                          "hf-quark",
                          "--output",
                          "/out",
                          "--overwrite",
                          "--label",
                          "team=ml",
                          "--max-attempts",
                          "5"});
  EXPECT_EQ(spec.model_uri(), std::string("file://") + cwd + "/models/m");
  EXPECT_EQ(spec.quantization().scheme(), "w_int8_per_channel_sym");
  EXPECT_EQ(spec.quantization().group_size(), 64);
  ASSERT_EQ(spec.quantization().exclude_size(), 1);
  EXPECT_EQ(spec.quantization().exclude(0), "*down_proj");
  EXPECT_TRUE(spec.quantization().fp8_kv_cache());
  EXPECT_EQ(spec.calibration().dataset_uri(), "file:///data/c.parquet");
  EXPECT_EQ(spec.calibration().text_field(), "messages");
  EXPECT_EQ(spec.calibration().num_samples(), 16);
  EXPECT_EQ(spec.calibration().seq_len(), 128);
  EXPECT_EQ(spec.evaluation().dataset_uri(), "hf://datasets/org/eval?split=test");
  EXPECT_EQ(spec.evaluation().text_field(), "content");
  EXPECT_EQ(spec.evaluation().n_ctx(), 512);
  EXPECT_EQ(spec.evaluation().max_windows(), 9);
  EXPECT_DOUBLE_EQ(spec.evaluation().max_perplexity_increase(), 0.02);
  EXPECT_DOUBLE_EQ(spec.evaluation().max_kl_divergence(), 0.5);
  ASSERT_EQ(spec.export_().formats_size(), 2);
  EXPECT_EQ(spec.export_().formats(0), quantd::v1::GGUF);
  EXPECT_EQ(spec.export_().formats(1), quantd::v1::HF_QUARK);
  EXPECT_EQ(spec.export_().output_uri(), "file:///out");
  EXPECT_TRUE(spec.export_().overwrite());
  EXPECT_EQ(spec.labels().at("team"), "ml");
  EXPECT_EQ(spec.max_attempts(), 5);
  EXPECT_EQ(spec.device(), "");  // the caller's default
}

// --algorithm lists algorithms with their default options, in flag order,
// beside a preset or alone beside a llama.cpp recipe.
TEST(JobSpecFlagsTest, AlgorithmFlags) {
  quantd::Status s;
  quantd::v1::JobSpec spec = Fill({"submit", "--model", "/m", "--gguf-type", "Q4_K_M", "--format",
                                   "gguf", "--algorithm", "gptq"},
                                  &s);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(spec.quantization().source_case(), quantd::v1::QuantizationSettings::SOURCE_NOT_SET);
  ASSERT_EQ(spec.quantization().algorithms_size(), 1);
  EXPECT_TRUE(spec.quantization().algorithms(0).has_gptq());
  EXPECT_FALSE(spec.quantization().algorithms(0).gptq().act_order());
  EXPECT_EQ(spec.export_().gguf_type(), "Q4_K_M");

  spec = Fill({"submit", "--model", "/m", "--scheme", "w_int4_per_group_sym", "--algorithm",
               "smoothquant", "--algorithm", "gptq"},
              &s);
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_EQ(spec.quantization().algorithms_size(), 2);
  EXPECT_TRUE(spec.quantization().algorithms(0).has_smooth_quant());
  EXPECT_TRUE(spec.quantization().algorithms(1).has_gptq());
}

TEST(JobSpecFlagsTest, BadFlagsAreNamed) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"submit", "--scheme", "x"}, "needs --model URI"},
      {{"submit", "--model", "/m"},
       "needs one of --scheme NAME, --config FILE or --gguf-type RECIPE"},
      {{"submit", "--model", "/m", "--scheme", "x", "--config", "/c.json"},
       "needs exactly one of --scheme NAME or --config FILE"},
      {{"submit", "--model", "/m", "--scheme", "x", "--max-kl", "lots"},
       "--max-kl needs a number, got 'lots'"},
      {{"submit", "--model", "/m", "--scheme", "x", "--format", "tflite"},
       "--format 'tflite' is not one of hf, hf-quark, gguf, onnx, compressed-tensors, torchscript"},
      {{"submit", "--model", "/m", "--scheme", "x", "--label", "novalue"},
       "--label 'novalue' is not KEY=VALUE"},
      {{"submit", "--model", "/m", "--config", "/no/such/file.json"},
       "--config: cannot read /no/such/file.json"},
      {{"submit", "--model", "/m", "--scheme", "x", "--calib-sampling", "shuffle"},
       "--calib-sampling 'shuffle' is not one of concat, random-windows"},
      {{"submit", "--model", "/m", "--scheme", "x", "--calib-seed", "-1"},
       "--calib-seed needs a non-negative integer, got '-1'"},
      {{"submit", "--model", "/m", "--scheme", "x", "--calib-sampling", "concat", "--calib-seed",
        "3"},
       "--calib-seed applies to --calib-sampling random-windows, not concat"},
      {{"submit", "--model", "/m", "--scheme", "x", "--calib-dtype", "fp16"},
       "--calib-dtype 'fp16' is not one of float32, bfloat16"},
      {{"submit", "--model", "/m", "--scheme", "x", "--algorithm", "sparsegpt"},
       "--algorithm 'sparsegpt' is not one of gptq, awq, smoothquant, autosmoothquant, rotation"},
  };
  for (const auto& [argv, message] : cases) {
    quantd::Status s;
    Fill(argv, &s);
    EXPECT_FALSE(s.ok());
    EXPECT_EQ(s.message(), message);
  }
}

TEST(JobSpecFlagsTest, GgufFloatTypeFlag) {
  const std::vector<std::string> base = {"submit", "--model", "/m", "--scheme", "x", "--format",
                                         "gguf"};
  EXPECT_EQ(Fill(base).export_().gguf_float_type(), quantd::v1::GGUF_FLOAT_TYPE_UNSPECIFIED);
  for (const auto& [flag, want] : {std::pair{"f32", quantd::v1::GGUF_F32},
                                   {"f16", quantd::v1::GGUF_F16},
                                   {"bf16", quantd::v1::GGUF_BF16}}) {
    auto argv = base;
    argv.insert(argv.end(), {"--gguf-float-type", flag});
    EXPECT_EQ(Fill(argv).export_().gguf_float_type(), want) << flag;
  }
  auto argv = base;
  argv.insert(argv.end(), {"--gguf-float-type", "q8_0"});
  quantd::Status s;
  Fill(argv, &s);
  EXPECT_EQ(s.message(), "--gguf-float-type 'q8_0' is not one of f32, f16, bf16");
}

// --gguf-type alone is a whole quantization: the spec then has no
// quantization settings at all (the engine refuses a recipe beside them).
TEST(JobSpecFlagsTest, GgufTypeTakesThePlaceOfAScheme) {
  const auto recipe =
      Fill({"submit", "--model", "/m", "--format", "gguf", "--gguf-type", "Q4_K_M"});
  EXPECT_EQ(recipe.export_().gguf_type(), "Q4_K_M");
  EXPECT_FALSE(recipe.has_quantization());
  const auto both = Fill({"submit", "--model", "/m", "--scheme", "w_int4_per_group_sym", "--format",
                          "gguf", "--gguf-type", "q6_k"});
  EXPECT_EQ(both.export_().gguf_type(), "q6_k");
  EXPECT_EQ(both.quantization().scheme(), "w_int4_per_group_sym");
}

TEST(JobSpecFlagsTest, CalibrationComputeDtype) {
  const auto bf16 = Fill({"submit", "--model", "/m", "--scheme", "x", "--calib", "/c.txt",
                          "--calib-dtype", "bfloat16"});
  EXPECT_EQ(bf16.calibration().compute_dtype(), quantd::v1::COMPUTE_BFLOAT16);
  const auto f32 = Fill({"submit", "--model", "/m", "--scheme", "x", "--calib-dtype", "float32"});
  EXPECT_EQ(f32.calibration().compute_dtype(), quantd::v1::COMPUTE_FLOAT32);
  const auto unset = Fill({"submit", "--model", "/m", "--scheme", "x", "--calib", "/c.txt"});
  EXPECT_EQ(unset.calibration().compute_dtype(), quantd::v1::COMPUTE_DTYPE_UNSPECIFIED);
}

TEST(JobSpecFlagsTest, CalibrationSamplingAndSeed) {
  const auto windows =
      Fill({"submit", "--model", "/m", "--scheme", "x", "--calib", "/c.txt", "--calib-sampling",
            "random-windows", "--calib-seed", "18446744073709551615"});
  EXPECT_EQ(windows.calibration().sampling(), quantd::v1::RANDOM_WINDOWS);
  EXPECT_EQ(windows.calibration().seed(), 18446744073709551615ull);
  const auto concat = Fill({"submit", "--model", "/m", "--scheme", "x", "--calib", "/c.txt",
                            "--calib-sampling", "concat"});
  EXPECT_EQ(concat.calibration().sampling(), quantd::v1::CONCAT);
  EXPECT_EQ(concat.calibration().seed(), 0u);
  // Neither flag: the worker's default (the proto's SAMPLING_MODE_UNSPECIFIED).
  const auto unset = Fill({"submit", "--model", "/m", "--scheme", "x", "--calib", "/c.txt"});
  EXPECT_EQ(unset.calibration().sampling(), quantd::v1::SAMPLING_MODE_UNSPECIFIED);
  const auto seed_only =
      Fill({"submit", "--model", "/m", "--scheme", "x", "--calib", "/c.txt", "--calib-seed", "7"});
  EXPECT_EQ(seed_only.calibration().seed(), 7u);
}

TEST(JobSpecFlagsTest, PathsBecomeUrisThatParseBackToThem) {
  char cwd[PATH_MAX];
  ASSERT_NE(getcwd(cwd, sizeof(cwd)), nullptr);
  EXPECT_EQ(ToUri("./models/../models/x/"), std::string("file://") + cwd + "/models/x");
  EXPECT_EQ(ToUri("/data/50%/a?b#c"), "file:///data/50%25/a%3Fb%23c");
  EXPECT_EQ(ToUri("file:///as/is?"), "file:///as/is?");
}

// The usage text lists exactly the shared flags, each once, at the indent
// asked for and with the help in one column.
TEST(JobSpecFlagsTest, UsageListsEverySharedFlagOnce) {
  std::set<std::string> want = JobSpecValueFlags();
  want.insert(JobSpecBoolFlags().begin(), JobSpecBoolFlags().end());
  std::multiset<std::string> listed;
  for (absl::string_view line : absl::StrSplit(JobSpecFlagsUsage(6), '\n', absl::SkipEmpty())) {
    ASSERT_GT(line.size(), 31u) << line;
    EXPECT_EQ(line.substr(0, 6), "      ") << line;
    EXPECT_NE(line[30], ' ') << "help not 24 columns after the indent: " << line;
    EXPECT_EQ(line[29], ' ') << line;
    if (line[6] == ' ') continue;  // a help's second line
    ASSERT_EQ(line.substr(6, 2), "--") << line;
    std::string flag(line.substr(8));
    listed.insert(flag.substr(0, flag.find(' ')));
  }
  EXPECT_EQ(std::set<std::string>(listed.begin(), listed.end()), want);
  EXPECT_EQ(listed.size(), want.size());  // none listed twice
}

}  // namespace
}  // namespace quantd::cli_common
