#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "worker/config/presets.h"
#include "worker/job_spec/config_proto.h"
#include "worker/job_spec/resolve_job.h"
#include "worker/job_spec/serving_check.h"
#include "worker/job_spec/testing/five_mistakes.h"

namespace quantd::job_spec {
namespace {

quantd::v1::JobSpec Parse(const std::string& text) {
  quantd::v1::JobSpec spec;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &spec)) << text;
  return spec;
}

std::vector<std::string> Fields(const Status& s) {
  std::vector<std::string> out;
  for (const auto& v : s.violations()) out.push_back(v.field);
  return out;
}

TEST(JobSpecCheckTest, AcceptsFoundationJob) {
  auto spec = Parse(R"pb(
    model_uri: "file:///models/stories260K"
    quantization { scheme: "w_int4_per_group_sym" group_size: 32 }
    evaluation { dataset_uri: "file:///data/tinystories.txt" n_ctx: 256 }
    export { formats: HF_FAKE_QUANTIZED output_uri: "file:///tmp/out" }
    device: "cpu"
  )pb");
  EXPECT_TRUE(CheckJobSpec(spec).ok()) << CheckJobSpec(spec);
}

TEST(JobSpecCheckTest, ListsEveryBadField) {
  auto spec = Parse(R"pb(
    model_uri: "models/relative"
    quantization { scheme: "w_int5_magic" group_size: -4 }
    evaluation { n_ctx: 1 max_windows: -1 }
    device: "tpu"
    max_attempts: 0
  )pb");
  Status s = CheckJobSpec(spec);
  ASSERT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.reason(), "INVALID_JOB_SPEC");
  std::vector<std::string> fields;
  for (const auto& v : s.violations()) fields.push_back(v.field);
  EXPECT_EQ(fields, (std::vector<std::string>{
                        "spec.model_uri", "spec.quantization.scheme",
                        "spec.quantization.group_size", "spec.evaluation.n_ctx",
                        "spec.evaluation.max_windows", "spec.device", "spec.max_attempts"}));
  // The count leads, apart from the first violation's own words.
  EXPECT_EQ(s.message().rfind("invalid job spec: 7 violations; the first: spec.model_uri: ", 0), 0u)
      << s.message();
  EXPECT_EQ(s.message().find("more)"), std::string::npos) << s.message();
}

TEST(JobSpecCheckTest, UnknownSchemeNamesTheSupportedOnes) {
  auto spec = Parse(R"pb(model_uri: "file:///m"
                         quantization { scheme: "int4" })pb");
  Status s = CheckJobSpec(spec);
  ASSERT_EQ(s.violations().size(), 1u);
  EXPECT_EQ(s.violations()[0].field, "spec.quantization.scheme");
  EXPECT_NE(s.violations()[0].description.find("w_uint4_per_group_asym"), std::string::npos);
}

TEST(JobSpecCheckTest, MissingQuantizationIsInvalid) {
  auto spec = Parse(R"pb(model_uri: "file:///m")pb");
  Status s = CheckJobSpec(spec);
  ASSERT_EQ(s.violations().size(), 1u);
  EXPECT_EQ(s.violations()[0].field, "spec.quantization");
}

TEST(JobSpecCheckTest, ExportFormatsAreCheckedAgainstTheConfig) {
  auto spec = Parse(R"pb(
    model_uri: "file:///m"
    quantization { scheme: "w_int8_per_channel_sym" }
    export { formats: HF_FAKE_QUANTIZED formats: HF_QUARK formats: GGUF formats: ONNX_QDQ }
  )pb");
  EXPECT_TRUE(CheckJobSpec(spec).ok()) << CheckJobSpec(spec);

  // GGUF's one MX block format is MXFP4 and ONNX has none; hf_quark and the
  // fake-quantized export hold every MX format.
  spec.mutable_quantization()->set_scheme("w_mxfp6_e2m3");
  Status s = CheckJobSpec(spec);
  ASSERT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
  EXPECT_EQ(Fields(s),
            (std::vector<std::string>{"spec.export.formats[2]", "spec.export.formats[3]"}));
  EXPECT_NE(s.violations()[0].description.find("global_quant_config"), std::string::npos) << s;
  EXPECT_NE(s.violations()[0].description.find("gguf"), std::string::npos) << s;
  spec.mutable_quantization()->set_scheme("w_mxfp4");
  s = CheckJobSpec(spec);
  EXPECT_EQ(Fields(s), (std::vector<std::string>{"spec.export.formats[3]"})) << s;
}

TEST(JobSpecCheckTest, OnlineHadamardRotationIsUnimplementedBecauseNoFormatCarriesIt) {
  auto spec = Parse(R"pb(
    model_uri: "file:///m"
    calibration { dataset_uri: "file:///data/calib.txt" }
    quantization {
      scheme: "w_int4_per_channel_sym"
      algorithms { rotation { online_hadamard: true } }
    }
  )pb");
  Status s = CheckJobSpec(spec);
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented) << s;
  EXPECT_NE(s.message().find("spec.quantization.algorithms[0]"), std::string::npos) << s;
  spec.mutable_quantization()->mutable_algorithms(0)->mutable_rotation()->set_online_hadamard(
      false);
  EXPECT_TRUE(CheckJobSpec(spec).ok()) << CheckJobSpec(spec);
}

TEST(JobSpecCheckTest, DeviceForms) {
  for (const char* ok : {"", "cpu", "cuda", "cuda:0", "cuda:12"}) {
    auto spec = Parse(R"pb(model_uri: "file:///m"
                           quantization { scheme: "w_int8_per_tensor_sym" })pb");
    spec.set_device(ok);
    EXPECT_TRUE(CheckJobSpec(spec).ok()) << ok;
  }
  for (const char* bad : {"gpu", "cuda:", "cuda:x", "cpu:0"}) {
    auto spec = Parse(R"pb(model_uri: "file:///m"
                           quantization { scheme: "w_int8_per_tensor_sym" })pb");
    spec.set_device(bad);
    EXPECT_EQ(CheckJobSpec(spec).code(), StatusCode::kInvalidArgument) << bad;
  }
}

// The reference toolkit's JSON for FP8 weights, FP8 activations and an FP8
// KV cache (as a Quark FP8-KV export writes it: kv specs as layer configs of
// *k_proj / *v_proj with output_tensors).
constexpr const char* kFp8KvJson = R"({
  "quant_method": "quark",
  "global_quant_config": {
    "weight": {"dtype": "fp8_e4m3", "qscheme": "per_tensor", "is_dynamic": false},
    "input_tensors": {"dtype": "fp8_e4m3", "qscheme": "per_tensor", "is_dynamic": false},
    "output_tensors": null, "bias": null},
  "layer_quant_config": {
    "*k_proj": {"weight": {"dtype": "fp8_e4m3", "qscheme": "per_tensor"},
                "input_tensors": {"dtype": "fp8_e4m3", "qscheme": "per_tensor"},
                "output_tensors": {"dtype": "fp8_e4m3", "qscheme": "per_tensor"}},
    "*v_proj": {"weight": {"dtype": "fp8_e4m3", "qscheme": "per_tensor"},
                "input_tensors": {"dtype": "fp8_e4m3", "qscheme": "per_tensor"},
                "output_tensors": {"dtype": "fp8_e4m3", "qscheme": "per_tensor"}}},
  "exclude": ["lm_head"],
  "export": {"kv_cache_group": ["*k_proj", "*v_proj"], "min_kv_scale": 0.0}
})";

TEST(JobSpecCheckTest, EveryPresetIsAccepted) {
  for (const char* scheme :
       {"w_int4_per_channel_sym", "w_uint4_per_group_asym", "w_int8_a_int8_per_token_dynamic",
        "w_fp8_per_channel_a_fp8_per_token_dynamic", "w_mxfp4_a_mxfp6_e2m3", "w_mxint8_a_mxint8",
        "w_bf16", "w_int8_per_tensor_mse"}) {
    auto spec = Parse(R"pb(model_uri: "file:///m"
                           calibration { dataset_uri: "file:///data/c.txt" })pb");
    spec.mutable_quantization()->set_scheme(scheme);
    EXPECT_TRUE(CheckJobSpec(spec).ok()) << scheme << ": " << CheckJobSpec(spec);
  }
}

TEST(JobSpecCheckTest, ReferenceJsonForFp8WeightsActivationsAndKvCacheIsAccepted) {
  auto spec = Parse(R"pb(model_uri: "file:///m"
                         calibration { dataset_uri: "file:///data/c.txt" })pb");
  spec.mutable_quantization()->set_quark_json(kFp8KvJson);
  EXPECT_TRUE(CheckJobSpec(spec).ok()) << CheckJobSpec(spec);

  // Static activations and the KV cache are calibrated.
  spec.clear_calibration();
  Status s = CheckJobSpec(spec);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Fields(s), std::vector<std::string>{"spec.calibration.dataset_uri"});

  auto preset =
      Parse(R"pb(model_uri: "file:///m"
                 quantization { scheme: "w_int8_per_channel_sym" fp8_kv_cache: true })pb");
  EXPECT_EQ(Fields(CheckJobSpec(preset)), std::vector<std::string>{"spec.calibration.dataset_uri"});
  EXPECT_NE(CheckJobSpec(preset).violations()[0].description.find("FP8 KV cache"),
            std::string::npos);
  // Dynamic activations need no calibration set.
  preset.mutable_quantization()->set_fp8_kv_cache(false);
  preset.mutable_quantization()->set_scheme("w_int8_a_int8_per_token_dynamic");
  EXPECT_TRUE(CheckJobSpec(preset).ok()) << CheckJobSpec(preset);
}

TEST(JobSpecCheckTest, FiveConfigMistakesGiveFiveViolations) {
  auto spec = Parse(std::string(R"pb(model_uri: "file:///m" quantization {)pb") +
                    testing::kFiveMistakesSettings + "}");
  Status s = CheckJobSpec(spec);
  ASSERT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.reason(), "INVALID_JOB_SPEC");
  EXPECT_EQ(Fields(s),
            (std::vector<std::string>{
                "spec.quantization.config.global_quant_config.weight.dtype",
                "spec.quantization.config.global_quant_config.input_tensors.is_dynamic",
                "spec.quantization.config.layer_type_quant_config[0].layer_type",
                "spec.quantization.config.layer_quant_config[0].config.weight.symmetric",
                "spec.quantization.config.layer_quant_config[1].config.weight.group_size"}));
}

// GPTQ with act_order and without static_groups groups permuted columns
// (a g_idx): only compressed_tensors (weight_g_idx) and hf_fake_quantized
// (values) hold it; static_groups makes every format fine.
TEST(JobSpecCheckTest, PermutedGptqGroupsAreRefusedForRealQuantizedFormats) {
  auto spec = Parse(R"pb(model_uri: "file:///m"
                         quantization {
                           scheme: "w_int4_per_group_sym"
                           group_size: 32
                           algorithms { gptq { act_order: true } }
                         }
                         calibration { dataset_uri: "file:///data/calib.txt" }
                         export {
                           formats: HF_FAKE_QUANTIZED
                           formats: HF_QUARK
                           formats: GGUF
                           formats: ONNX_QDQ
                           formats: COMPRESSED_TENSORS
                         })pb");
  Status s = CheckJobSpec(spec);
  EXPECT_EQ(Fields(s), (std::vector<std::string>{"spec.export.formats[1]", "spec.export.formats[2]",
                                                 "spec.export.formats[3]"}));
  ASSERT_FALSE(s.violations().empty());
  EXPECT_EQ(s.violations()[0].description,
            "hf_quark stores each weight group as contiguous columns, but GPTQ with act_order and "
            "without static_groups groups permuted columns (a g_idx): set static_groups, or "
            "export compressed_tensors (weight_g_idx) or hf_fake_quantized");
  spec.mutable_quantization()->mutable_algorithms(0)->mutable_gptq()->set_static_groups(true);
  EXPECT_TRUE(CheckJobSpec(spec).ok()) << CheckJobSpec(spec);
  // Per-channel weights have no groups to permute.
  spec.mutable_quantization()->set_scheme("w_int4_per_channel_sym");
  spec.mutable_quantization()->clear_group_size();
  spec.mutable_quantization()->mutable_algorithms(0)->mutable_gptq()->set_static_groups(false);
  EXPECT_TRUE(CheckJobSpec(spec).ok()) << CheckJobSpec(spec);
}

TEST(JobSpecCheckTest, AlgorithmsAreCheckedAndNeedCalibrationData) {
  auto spec = Parse(R"pb(model_uri: "file:///m"
                         quantization {
                           scheme: "w_int4_per_group_sym"
                           algorithms { gptq {} }
                         })pb");
  Status s = CheckJobSpec(spec);
  ASSERT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
  EXPECT_EQ(Fields(s), std::vector<std::string>{"spec.calibration.dataset_uri"});

  spec.mutable_calibration()->set_dataset_uri("file:///data/calib.txt");
  EXPECT_TRUE(CheckJobSpec(spec).ok()) << CheckJobSpec(spec);

  // A bad option names the algorithm's field.
  spec.mutable_quantization()->mutable_algorithms(0)->mutable_gptq()->set_damp_percent(2.0);
  s = CheckJobSpec(spec);
  ASSERT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
  EXPECT_EQ(Fields(s),
            std::vector<std::string>{"spec.quantization.algorithms[0].gptq.damp_percent"});

  // The reference JSON's algo_config goes through the same check.
  spec = Parse(R"pb(model_uri: "file:///m"
                    calibration { dataset_uri: "file:///data/calib.txt" })pb");
  spec.mutable_quantization()->set_quark_json(
      R"({"global_quant_config": {"weight": {"dtype": "int8"}},
          "algo_config": [{"name": "awq"}, {"name": "no_such_algorithm"}]})");
  s = CheckJobSpec(spec);
  ASSERT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
  EXPECT_EQ(Fields(s),
            std::vector<std::string>{"spec.quantization.quark_json.algo_config[1].name"});
}

// Conv2d, ConvTranspose2d and EmbeddingBag configs are for TorchScript
// models (worker/torchscript); an embedding bag's input is indices.
TEST(JobSpecCheckTest, TorchScriptLayerTypesAreAcceptedAndEmbeddingBagInputsRefused) {
  auto spec = Parse(R"pb(model_uri: "file:///m.pt"
                         quantization {
                           config {
                             global_quant_config { weight { dtype: INT8 } }
                             layer_type_quant_config {
                               layer_type: "Conv2d"
                               config { weight { dtype: INT8 } }
                             }
                             layer_type_quant_config {
                               layer_type: "EmbeddingBag"
                               config { weight { dtype: INT8 } }
                             }
                           }
                         })pb");
  EXPECT_TRUE(CheckJobSpec(spec).ok()) << CheckJobSpec(spec);
  spec.mutable_quantization()
      ->mutable_config()
      ->mutable_layer_type_quant_config(1)
      ->mutable_config()
      ->mutable_input_tensors()
      ->set_dtype(quantd::v1::INT8);
  Status s = CheckJobSpec(spec);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  // (and static inputs need calibration data)
  EXPECT_EQ(Fields(s),
            (std::vector<std::string>{
                "spec.quantization.config.layer_type_quant_config[1].input_tensors",
                "spec.calibration.dataset_uri"}))
      << s;
}

// The torchscript export carries static integer activations only; a
// classifier's accuracy gate is a fraction and needs evaluation data.
TEST(JobSpecCheckTest, TorchScriptExportAndAccuracyDropAreChecked) {
  auto spec = Parse(R"pb(model_uri: "file:///m.pt"
                         quantization {
                           config {
                             global_quant_config {
                               weight { dtype: INT8 }
                               input_tensors { dtype: FP8_E4M3 is_dynamic: true }
                             }
                           }
                         }
                         evaluation { max_accuracy_drop: 1.5 }
                         export { formats: TORCHSCRIPT })pb");
  Status s = CheckJobSpec(spec);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Fields(s),
            (std::vector<std::string>{"spec.evaluation.max_accuracy_drop",
                                      "spec.evaluation.dataset_uri", "spec.export.formats[0]"}))
      << s;
}

// A cost table names every candidate once, each cost in (0, 1e6], and
// leaves a quantizing candidate cheaper than float; a language model's
// budget is not a classifier's.
TEST(JobSpecCheckTest, AutoPrecisionCostTableAndBudgetAreChecked) {
  auto spec = Parse(R"pb(model_uri: "file:///m"
                         auto_precision {
                           candidates: [
                             "w_int4_per_channel_sym",
                             "w_uint4_per_channel_sym",
                             "w_int8_per_channel_sym",
                             "float"
                           ]
                           cost_per_weight { key: "w_int4_per_channel_sym" value: 3 }
                           cost_per_weight { key: "w_uint4_per_channel_sym" value: -1 }
                           cost_per_weight { key: "float" value: 1 }
                           cost_per_weight { key: "nope" value: 2 }
                         }
                         calibration { dataset_uri: "file:///c.txt" }
                         evaluation { dataset_uri: "file:///e.txt" max_accuracy_drop: 0.01 })pb");
  Status s = CheckJobSpec(spec);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Fields(s), (std::vector<std::string>{
                           "spec.auto_precision.cost_per_weight",
                           "spec.auto_precision.cost_per_weight[nope]",
                           "spec.auto_precision.cost_per_weight[w_uint4_per_channel_sym]",
                           "spec.auto_precision.cost_per_weight[float]",
                           "spec.evaluation.max_perplexity_increase",
                           "spec.evaluation.max_accuracy_drop",
                       }))
      << s;
  EXPECT_NE(s.ToString().find("no cost for the candidate 'w_int8_per_channel_sym'"),
            std::string::npos)
      << s;
  EXPECT_NE(s.ToString().find("float is the cheapest candidate"), std::string::npos) << s;

  auto fine =
      Parse(R"pb(model_uri: "file:///m"
                 auto_precision {
                   candidates: [ "w_int4_per_channel_sym", "float" ]
                   cost_per_weight { key: "w_int4_per_channel_sym" value: 4 }
                   cost_per_weight { key: "float" value: 32 }
                 }
                 calibration { dataset_uri: "file:///c.txt" }
                 evaluation { dataset_uri: "file:///e.txt" max_perplexity_increase: 0.02 })pb");
  EXPECT_TRUE(CheckJobSpec(fine).ok()) << CheckJobSpec(fine);
}

TEST(JobSpecCheckTest, EmbeddingQuantizesItsWeightOnlyAndNotIntoHfQuark) {
  auto ok = Parse(R"pb(model_uri: "file:///m"
                       quantization {
                         config {
                           layer_type_quant_config {
                             layer_type: "Embedding"
                             config { weight { dtype: INT8 qscheme: PER_CHANNEL ch_axis: 0 } }
                           }
                         }
                       })pb");
  EXPECT_TRUE(CheckJobSpec(ok).ok()) << CheckJobSpec(ok);
  auto with_input = ok;
  *with_input.mutable_quantization()
       ->mutable_config()
       ->mutable_layer_type_quant_config(0)
       ->mutable_config()
       ->mutable_input_tensors() =
      ok.quantization().config().layer_type_quant_config(0).config().weight();
  Status s = CheckJobSpec(with_input);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  ASSERT_FALSE(s.violations().empty()) << s;
  EXPECT_EQ(s.violations()[0].field,
            "spec.quantization.config.layer_type_quant_config[0].input_tensors");
  auto quark = ok;
  quark.mutable_export_()->add_formats(quantd::v1::HF_QUARK);
  s = CheckJobSpec(quark);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  ASSERT_FALSE(s.violations().empty()) << s;
  EXPECT_EQ(s.violations()[0].field, "spec.export.formats[0]");
  EXPECT_NE(s.violations()[0].description.find("hf_quark cannot carry a quantized embedding"),
            std::string::npos);
}

TEST(JobSpecCheckTest, ChecksTheConfigAgainstTheModelsLayersWhenReadable) {
  // stories260K: hidden 64, intermediate 172 (down_proj's input width). A
  // copy: the runfile is a link out of its directory, which the check does
  // not follow.
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "stories260K";
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file("models/stories260K/config.json", dir / "config.json",
                             std::filesystem::copy_options::overwrite_existing);
  const std::string model = "file://" + dir.string();
  auto spec = Parse(R"pb(quantization { scheme: "w_int4_per_group_sym" group_size: 32 })pb");
  spec.set_model_uri(model);
  std::vector<std::string> warnings;
  Status s = CheckJobSpec(spec, &warnings);
  ASSERT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
  EXPECT_EQ(Fields(s), std::vector<std::string>{"spec.quantization.group_size"});
  EXPECT_NE(s.violations()[0].description.find("does not divide the width 172"), std::string::npos)
      << s;
  EXPECT_NE(s.violations()[0].description.find("5 layers"), std::string::npos) << s;

  spec.mutable_quantization()->set_group_size(4);
  spec.mutable_quantization()->add_exclude("*.no_such_layer");
  warnings.clear();
  EXPECT_TRUE(CheckJobSpec(spec, &warnings).ok());
  EXPECT_EQ(warnings, std::vector<std::string>{"exclude glob '*.no_such_layer' matches no layer"});

  // Excluding the layers that do not fit makes the group size acceptable.
  spec.mutable_quantization()->set_group_size(32);
  spec.mutable_quantization()->add_exclude("*down_proj");
  EXPECT_TRUE(CheckJobSpec(spec).ok()) << CheckJobSpec(spec);

  // A model whose config.json is not readable here is checked by the worker.
  spec.set_model_uri("file:///no/such/model");
  spec.mutable_quantization()->clear_exclude();
  EXPECT_TRUE(CheckJobSpec(spec).ok());
  // So is one whose config.json leads out of its directory.
  const std::filesystem::path linked = dir.parent_path() / "linked260K";
  std::filesystem::create_directories(linked);
  std::filesystem::remove(linked / "config.json");
  std::filesystem::create_symlink(dir / "config.json", linked / "config.json");
  spec.set_model_uri("file://" + linked.string());
  EXPECT_TRUE(CheckJobSpec(spec).ok());
  // A percent-encoded path is decoded once, as the worker does.
  std::filesystem::create_directories(dir.parent_path() / "my model");
  std::filesystem::copy_file(dir / "config.json", dir.parent_path() / "my model" / "config.json",
                             std::filesystem::copy_options::overwrite_existing);
  spec.set_model_uri("file://" + (dir.parent_path() / "my%20model").string());
  EXPECT_EQ(CheckJobSpec(spec).code(), StatusCode::kInvalidArgument);
}

// A GGUF model's layers come from its metadata (issue 20), with the same
// checks as a directory's config.json, and only when the file stays inside
// its own directory.
TEST(JobSpecCheckTest, ChecksTheConfigAgainstAGgufModelsLayers) {
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "ggufs";
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file("models/stories260K/stories260K-f32.gguf", dir / "stories.gguf",
                             std::filesystem::copy_options::overwrite_existing);
  auto spec = Parse(R"pb(quantization { scheme: "w_int4_per_group_sym" group_size: 32 })pb");
  spec.set_model_uri("file://" + (dir / "stories.gguf").string());
  Status s = CheckJobSpec(spec);
  ASSERT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
  EXPECT_EQ(Fields(s), std::vector<std::string>{"spec.quantization.group_size"});
  EXPECT_NE(s.violations()[0].description.find("does not divide the width 172"), std::string::npos)
      << s;
  spec.mutable_quantization()->set_group_size(4);
  spec.mutable_quantization()->add_exclude("*.no_such_layer");
  std::vector<std::string> warnings;
  EXPECT_TRUE(CheckJobSpec(spec, &warnings).ok());
  EXPECT_EQ(warnings, std::vector<std::string>{"exclude glob '*.no_such_layer' matches no layer"});

  // A link to a GGUF elsewhere, or a file that is not a GGUF, is left to the
  // worker (which refuses both).
  const std::filesystem::path other = dir.parent_path() / "other";
  std::filesystem::create_directories(other);
  std::filesystem::remove(other / "linked.gguf");
  std::filesystem::create_symlink(dir / "stories.gguf", other / "linked.gguf");
  spec.set_model_uri("file://" + (other / "linked.gguf").string());
  warnings.clear();
  EXPECT_TRUE(CheckJobSpec(spec, &warnings).ok());
  EXPECT_TRUE(warnings.empty());
  std::ofstream(dir / "notes.gguf") << "{}";
  spec.set_model_uri("file://" + (dir / "notes.gguf").string());
  EXPECT_TRUE(CheckJobSpec(spec).ok());
}

// A format the model's architecture cannot take is refused at CreateJob,
// naming the format's field, with every other mistake (not when the job is
// about to export).
TEST(JobSpecCheckTest, FormatsTheArchitectureCannotTakeAreRefused) {
  const std::filesystem::path base = std::filesystem::path(::testing::TempDir()) / "archs";
  auto model = [&](const std::string& name, const std::string& config) {
    std::filesystem::create_directories(base / name);
    std::ofstream(base / name / "config.json") << config;
    return "file://" + (base / name).string();
  };
  const std::string gpt2 = model("gpt2", R"({"architectures": ["GPT2LMHeadModel"],
    "n_embd": 64, "n_layer": 2, "n_head": 4, "n_positions": 128, "vocab_size": 512})");
  const std::string qwen3 = model("qwen3", R"({"architectures": ["Qwen3ForCausalLM"],
    "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "vocab_size": 512})");
  const std::string opt = model("opt", R"({"architectures": ["OPTForCausalLM"],
    "hidden_size": 64, "ffn_dim": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
    "vocab_size": 512, "max_position_embeddings": 128})");
  auto spec = Parse(R"pb(quantization { scheme: "w_int8_per_channel_sym" }
                         export {
                           formats: HF_QUARK
                           formats: ONNX_QDQ
                           formats: GGUF
                           formats: COMPRESSED_TENSORS
                           formats: HF_FAKE_QUANTIZED
                         })pb");
  spec.set_model_uri(gpt2);
  Status s = CheckJobSpec(spec);
  ASSERT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
  EXPECT_EQ(Fields(s), (std::vector<std::string>{"spec.export.formats[0]", "spec.export.formats[1]",
                                                 "spec.export.formats[3]"}));
  EXPECT_NE(s.violations()[0].description.find(
                "hf_quark cannot hold GPT2LMHeadModel: GPT-2's Conv1D weights"),
            std::string::npos)
      << s;
  spec.set_model_uri(qwen3);
  s = CheckJobSpec(spec);
  EXPECT_EQ(Fields(s), std::vector<std::string>{"spec.export.formats[1]"}) << s;
  EXPECT_NE(s.message().find("onnx_qdq does not write per-head q/k norms"), std::string::npos) << s;
  spec.set_model_uri(opt);
  s = CheckJobSpec(spec);
  EXPECT_EQ(Fields(s),
            (std::vector<std::string>{"spec.export.formats[1]", "spec.export.formats[2]"}))
      << s;
  // LongRoPE's table changes with the sequence length: not one ONNX table,
  // and no llama.cpp rope scaling that quantd writes.
  spec.set_model_uri(model("longrope", R"({"architectures": ["LlamaForCausalLM"],
    "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4,
    "vocab_size": 512, "max_position_embeddings": 256, "original_max_position_embeddings": 64,
    "rope_scaling": {"type": "longrope", "short_factor": [1, 1, 1, 1],
                     "long_factor": [1, 2, 4, 8]}})"));
  s = CheckJobSpec(spec);
  EXPECT_EQ(Fields(s),
            (std::vector<std::string>{"spec.export.formats[1]", "spec.export.formats[2]"}))
      << s;
  EXPECT_NE(s.violations()[0].description.find(
                "onnx_qdq cannot hold LlamaForCausalLM: onnx_qdq bakes one rotary table into the "
                "graph, and longrope rope scaling changes it with the sequence length"),
            std::string::npos)
      << s;
  EXPECT_NE(s.violations()[1].description.find(
                "gguf cannot hold LlamaForCausalLM: quantd writes llama.cpp's rope scaling for "
                "linear, llama3 and yarn only, not longrope"),
            std::string::npos)
      << s;
  // Phi-3: its fused projections go to every format but ONNX, and its
  // block is not one rotation can fold into.
  const std::string phi3 = model("phi3", R"({"architectures": ["Phi3ForCausalLM"],
    "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 512})");
  spec.set_model_uri(phi3);
  s = CheckJobSpec(spec);
  EXPECT_EQ(Fields(s), std::vector<std::string>{"spec.export.formats[1]"}) << s;
  EXPECT_NE(s.message().find("onnx_qdq cannot hold Phi3ForCausalLM"), std::string::npos) << s;
  auto rotated = Parse(R"pb(calibration { dataset_uri: "file:///data/calib.txt" }
                            quantization {
                              scheme: "w_int4_per_channel_sym"
                              algorithms { rotation {} }
                            })pb");
  rotated.set_model_uri(phi3);
  s = CheckJobSpec(rotated);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
  EXPECT_EQ(Fields(s), std::vector<std::string>{"spec.quantization.algorithms[0]"}) << s;
  EXPECT_NE(s.message().find("Phi3ForCausalLM has another block"), std::string::npos) << s;
  rotated.set_model_uri(qwen3);
  EXPECT_TRUE(CheckJobSpec(rotated).ok()) << CheckJobSpec(rotated);
  // A model whose config is not readable here is left to the worker.
  spec.set_model_uri("file:///no/such/model");
  EXPECT_TRUE(CheckJobSpec(spec).ok());
}

TEST(JobSpecCheckTest, UrisGoThroughTheOneParser) {
  auto spec = Parse(R"pb(quantization { scheme: "w_int8_per_channel_sym" })pb");
  spec.set_model_uri("file:///models/m?/../x");
  spec.mutable_calibration()->set_dataset_uri("file:///data/a%2Fb");
  spec.mutable_evaluation()->set_dataset_uri("file:///data/%2e%2e/etc");
  spec.mutable_export_()->set_output_uri("file:///out#/../victim");
  Status s = CheckJobSpec(spec);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Fields(s),
            (std::vector<std::string>{"spec.model_uri", "spec.calibration.dataset_uri",
                                      "spec.evaluation.dataset_uri", "spec.export.output_uri"}));
}

std::string Description(const Status& s, const std::string& field) {
  for (const auto& v : s.violations()) {
    if (v.field == field) return v.description;
  }
  return "<no violation on " + field + ">";
}

TEST(JobSpecCheckTest, HubDatasetUrisAreCheckedWithEveryMistakeNamed) {
  auto spec = Parse(R"pb(quantization { scheme: "w_int8_per_channel_sym" })pb");
  spec.set_model_uri("hf://datasets/acme/chat");
  spec.mutable_calibration()->set_dataset_uri(
      "hf://datasets/acme/chat?split=train_sft&field=messages");
  spec.mutable_calibration()->set_text_field("text");
  spec.mutable_evaluation()->set_dataset_uri("hf://datasets/acme/chat?split=test&colour=red");
  Status s = CheckJobSpec(spec);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Fields(s), (std::vector<std::string>{"spec.model_uri", "spec.calibration.text_field",
                                                 "spec.evaluation.dataset_uri"}));
  EXPECT_EQ(Description(s, "spec.model_uri"),
            "names a dataset (hf://datasets/...); a model is hf://ORG/NAME[@REV]");
  EXPECT_EQ(Description(s, "spec.calibration.text_field"),
            "is 'text' but spec.calibration.dataset_uri says field=messages");
  EXPECT_EQ(Description(s, "spec.evaluation.dataset_uri"),
            "the dataset query: unknown key 'colour' (known: split, config, field, file)");
  spec.mutable_evaluation()->set_dataset_uri("hf://acme/tiny");
  EXPECT_EQ(Description(CheckJobSpec(spec), "spec.evaluation.dataset_uri"),
            "names a model; a dataset on the Hub is hf://datasets/ORG/NAME[@REV][?split=...]");

  spec.set_model_uri("hf://acme/tiny");
  spec.mutable_calibration()->set_dataset_uri(
      "hf://datasets/acme/chat@v2?split=train_sft&field=messages");
  spec.mutable_calibration()->set_text_field("messages");
  spec.mutable_evaluation()->set_dataset_uri(
      "hf://datasets/wikitext/wikitext?config=wikitext-2-raw-v1&split=test");
  EXPECT_TRUE(CheckJobSpec(spec).ok()) << CheckJobSpec(spec);
}

// ---- hostile input (issue 17): every parser and pattern bounded ----

std::string Deep(int depth) { return std::string(depth, '[') + std::string(depth, ']'); }

TEST(JobSpecCheckTest, DeeplyNestedQuarkJsonIsRefusedWithEveryOtherViolation) {
  auto spec = Parse(R"pb(model_uri: "file:///m" device: "tpu")pb");
  spec.mutable_quantization()->set_quark_json(
      R"({"global_quant_config": {"weight": {"dtype": "int8", "qscheme": "per_tensor"}},)"
      R"( "unknown": )" +
      Deep(100000) + "}");
  spec.mutable_quantization()->add_exclude("re:(unclosed");
  spec.mutable_quantization()->add_exclude("re:" + std::string(100000, '(') + "a" +
                                           std::string(100000, ')'));
  const Status s = CheckJobSpec(spec);
  ASSERT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
  EXPECT_EQ(Fields(s), (std::vector<std::string>{"spec.quantization.quark_json",
                                                 "spec.quantization.exclude[0]",
                                                 "spec.quantization.exclude[1]", "spec.device"}))
      << s;
  EXPECT_EQ(Description(s, "spec.quantization.quark_json"), "nests 100001 levels deep; at most 64");
  EXPECT_NE(Description(s, "spec.quantization.exclude[0]")
                .find("is not a valid regular expression (RE2: missing ): (unclosed)"),
            std::string::npos)
      << s;
  EXPECT_EQ(Description(s, "spec.quantization.exclude[1]"),
            "the regular expression is 200001 characters; at most 1024");
}

TEST(JobSpecCheckTest, OversizedQuarkJsonIsRefusedBeforeParsing) {
  auto spec = Parse(R"pb(model_uri: "file:///m")pb");
  spec.mutable_quantization()->set_quark_json("{\"x\": \"" + std::string(300 << 10, 'a') + "\"}");
  const Status s = CheckJobSpec(spec);
  ASSERT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
  EXPECT_EQ(Description(s, "spec.quantization.quark_json"), "is 307209 bytes; at most 262144");
}

TEST(JobSpecCheckTest, BacktrackingExcludeRegexIsLinearOnRe2) {
  // Exponential under std::regex against a long name; RE2 matches each
  // layer name in one pass. The result is asserted, not the time. A copy
  // of the config: the runfile is a link out of its directory, which the
  // check does not follow.
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / "stories260K-backtracking";
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file("models/stories260K/config.json", dir / "config.json",
                             std::filesystem::copy_options::overwrite_existing);
  const std::string model = "file://" + dir.string();
  auto spec = Parse(R"pb(quantization { scheme: "w_int8_per_tensor_sym" })pb");
  spec.set_model_uri(model);
  spec.mutable_quantization()->add_exclude("re:(?:[a-z0-9_.]|[a-z0-9_.])*!");
  spec.mutable_quantization()->add_exclude("re:(?:[a-z0-9_.]|[a-z0-9_.])*down_proj");
  std::vector<std::string> warnings;
  const Status s = CheckJobSpec(spec, &warnings);
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(warnings, std::vector<std::string>{
                          "exclude glob 're:(?:[a-z0-9_.]|[a-z0-9_.])*!' matches no layer"});
}

TEST(JobSpecCheckTest, DeeplyNestedRegexWithinTheLengthCapCompiles) {
  auto spec = Parse(R"pb(model_uri: "file:///m"
                         quantization { scheme: "w_int8_per_tensor_sym" })pb");
  spec.mutable_quantization()->add_exclude("re:" + std::string(500, '(') + "lm_head" +
                                           std::string(500, ')'));
  EXPECT_TRUE(CheckJobSpec(spec).ok()) << CheckJobSpec(spec);
}

TEST(JobSpecCheckTest, PatternCountAndLengthAreCapped) {
  auto spec = Parse(R"pb(model_uri: "file:///m"
                         quantization { scheme: "w_int8_per_tensor_sym" })pb");
  // The preset's own exclude (lm_head) counts too.
  for (int i = 0; i < 1000; ++i) spec.mutable_quantization()->add_exclude("*x" + std::to_string(i));
  Status s = CheckJobSpec(spec);
  ASSERT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
  EXPECT_EQ(Fields(s), std::vector<std::string>{"spec.quantization.exclude"});
  EXPECT_EQ(Description(s, "spec.quantization.exclude"),
            "with the config's own, the settings hold 1001 layer name patterns; at most 1000");

  spec.mutable_quantization()->clear_exclude();
  spec.mutable_quantization()->add_exclude(std::string(1025, '*'));
  s = CheckJobSpec(spec);
  EXPECT_EQ(Description(s, "spec.quantization.exclude[0]"),
            "the glob is 1025 characters; at most 1024");
}

TEST(JobSpecCheckTest, ValidationStopsAtItsBudget) {
  // 4096 blocks (28 672 linear layers) against 1000 globs (the preset's
  // lm_head and 999 slow ones): far more than 1 ms of work on any machine.
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "budget_model";
  std::filesystem::create_directories(dir);
  std::ifstream in("models/stories260K/config.json");
  std::stringstream text;
  text << in.rdbuf();
  std::string config = text.str();
  const std::string layers = "\"num_hidden_layers\": 5";
  config.replace(config.find(layers), layers.size(), "\"num_hidden_layers\": 4096");
  std::ofstream(dir / "config.json") << config;

  auto spec = Parse(R"pb(quantization { scheme: "w_int8_per_tensor_sym" }
                         device: "tpu")pb");
  spec.set_model_uri("file://" + dir.string());
  std::string slow;
  for (int i = 0; i < 60; ++i) slow += "*.";
  for (int i = 0; i < 999; ++i) {
    spec.mutable_quantization()->add_exclude(slow + "x" + std::to_string(i));
  }
  std::vector<std::string> warnings;
  const Status s = CheckJobSpec(spec, &warnings, std::chrono::milliseconds(1));
  ASSERT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
  EXPECT_EQ(s.reason(), "INVALID_JOB_SPEC");
  EXPECT_EQ(Fields(s), (std::vector<std::string>{"spec.quantization", "spec.device"})) << s;
  EXPECT_EQ(Description(s, "spec.quantization").rfind("validation exceeded its budget of 1 ms", 0),
            0u)
      << s;
  EXPECT_TRUE(warnings.empty());
}

// A copy of stories260K's config.json (the runfile is a link out of its
// directory, which the check does not follow): 8 heads, 4 kv heads.
std::string StoriesModelUri(const std::string& name) {
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / name;
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file("models/stories260K/config.json", dir / "config.json",
                             std::filesystem::copy_options::overwrite_existing);
  return "file://" + dir.string();
}

// Issue 25's config: five mistakes, two of them in one spec.
TEST(JobSpecCheckTest, FiveMistakesOfAQuarkConfigAreAllNamedAndCounted) {
  quantd::v1::JobSpec spec;
  spec.set_model_uri("file:///m");
  spec.mutable_quantization()->set_quark_json(R"({
    "quant_method": "quark",
    "global_quant_config": {
      "weight": {"dtype": "int5", "qscheme": "per_group", "group_size": -3, "ch_axis": 1},
      "input_tensors": {"dtype": "int8", "qscheme": "per_group", "group_size": 32,
                        "is_dynamic": false, "symmetric": true}
    },
    "layer_quant_config": {
      "*down_proj": {
        "weight": {"dtype": "int4", "qscheme": "per_sandwich", "symmetric": true},
        "output_tensors": {"dtype": "fp4", "qscheme": "per_group", "group_size": 32,
                           "scale_format": "e8m0", "symmetric": false, "is_dynamic": true}
      }
    },
    "exclude": ["lm_head"]
  })");
  spec.mutable_calibration()->set_dataset_uri("file:///data/c.txt");
  Status s = CheckJobSpec(spec);
  ASSERT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
  const std::string q = "spec.quantization.quark_json.";
  EXPECT_EQ(Fields(s), (std::vector<std::string>{
                           q + "global_quant_config.weight.dtype",
                           q + "global_quant_config.weight.group_size",
                           q + "layer_quant_config.*down_proj.weight.qscheme",
                           q + "global_quant_config.input_tensors.is_dynamic",
                           q + "layer_quant_config.*down_proj.output_tensors.symmetric",
                       }));
  // The count leads; the first violation's list of dtypes ends the line.
  EXPECT_EQ(s.message().rfind("invalid job spec: 5 violations; the first: " + q +
                                  "global_quant_config.weight.dtype: unknown dtype 'int5'; "
                                  "supported: int2, ",
                              0),
            0u)
      << s.message();
  EXPECT_NE(s.message().find(", fp6_e3m2, mx"), std::string::npos) << s.message();
  EXPECT_EQ(s.message().find("more)"), std::string::npos) << s.message();
}

TEST(JobSpecCheckTest, QuarkOnlineAndKeysWithoutEffectBecomeWarnings) {
  quantd::v1::JobSpec spec;
  spec.set_model_uri("file:///m");
  spec.mutable_quantization()->set_quark_json(R"({
    "quant_method": "quark_online",
    "global_quant_config": {"weight": {"dtype": "int4", "qscheme": "per_channel", "ch_axis": 0,
                                       "block_size": 128}},
    "softmax_quant_spec": {"dtype": "fp8_e4m3"},
    "kv_cache_post_rope": true,
    "export": {"max_input_numel": 1024}
  })");
  std::vector<std::string> warnings;
  ASSERT_TRUE(CheckJobSpec(spec, &warnings).ok()) << CheckJobSpec(spec);
  std::vector<std::string> keys;
  for (const std::string& w : warnings) keys.push_back(w.substr(0, w.find(": ")));
  const std::string q = "spec.quantization.quark_json.";
  EXPECT_EQ(keys,
            (std::vector<std::string>{
                q + "quant_method", q + "global_quant_config.weight.block_size",
                q + "softmax_quant_spec", q + "kv_cache_post_rope", q + "export.max_input_numel"}));
  EXPECT_NE(warnings[0].find("'quark_online' is read as 'quark'"), std::string::npos);
  EXPECT_NE(warnings[1].find("takes no effect"), std::string::npos);
}

TEST(JobSpecCheckTest, AModelThatIsAnUnreadableQuantizedCheckpointIsRefused) {
  // stories260K's config.json with a quantization_config: quark and
  // compressed-tensors checkpoints are read, another quant_method is named.
  std::ifstream in("models/stories260K/config.json");
  std::stringstream text;
  text << in.rdbuf();
  const std::string base = text.str();
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "quantized260K";
  std::filesystem::create_directories(dir);
  auto with_method = [&](const std::string& method) {
    const size_t brace = base.find('{');
    std::ofstream(dir / "config.json", std::ios::trunc)
        << base.substr(0, brace + 1) << "\"quantization_config\": {\"quant_method\": \""
        << method << "\"}," << base.substr(brace + 1);
    auto spec = Parse(R"pb(quantization { scheme: "w_int8_per_channel_sym" })pb");
    spec.set_model_uri("file://" + dir.string());
    return CheckJobSpec(spec);
  };
  EXPECT_TRUE(with_method("compressed-tensors").ok()) << with_method("compressed-tensors");
  EXPECT_TRUE(with_method("quark").ok()) << with_method("quark");
  Status gptq = with_method("gptq");
  ASSERT_EQ(gptq.code(), StatusCode::kInvalidArgument) << gptq;
  EXPECT_EQ(Fields(gptq), std::vector<std::string>{"spec.model_uri"});
  EXPECT_NE(gptq.violations()[0].description.find(
                "quantization_config.quant_method \"gptq\", which is not read; quantd starts "
                "from a float checkpoint or from a \"quark\""),
            std::string::npos)
      << gptq;
}

TEST(JobSpecCheckTest, AwqScalingLayersAreCheckedAgainstTheModel) {
  quantd::v1::JobSpec spec;
  spec.set_model_uri(StoriesModelUri("stories260K-awq"));
  spec.mutable_calibration()->set_dataset_uri("file:///data/c.txt");
  auto config = [](const std::string& scaling_layers) {
    return R"({"global_quant_config": {"weight": {"dtype": "int4", "qscheme": "per_channel",
      "ch_axis": 0}}, "algo_config": [{"name": "awq", "model_decoder_layers": "model.layers",
      "scaling_layers": [)" +
           scaling_layers + "]}]}";
  };
  // The MLP groups: honoured.
  spec.mutable_quantization()->set_quark_json(config(
      R"({"prev_op": "post_attention_layernorm", "layers": ["mlp.gate_proj", "mlp.up_proj"],
          "inp": "mlp.gate_proj", "module2inspect": "mlp"},
         {"prev_op": "mlp.up_proj", "layers": ["mlp.down_proj"], "inp": "mlp.down_proj"})"));
  std::vector<std::string> warnings;
  EXPECT_TRUE(CheckJobSpec(spec, &warnings).ok()) << CheckJobSpec(spec);
  EXPECT_TRUE(warnings.empty()) << warnings[0];
  // v_proj -> o_proj under grouped-query attention cannot be honoured.
  spec.mutable_quantization()->set_quark_json(
      config(R"({"prev_op": "self_attn.v_proj", "layers": ["self_attn.o_proj"],
                 "inp": "self_attn.o_proj"})"));
  Status s = CheckJobSpec(spec);
  ASSERT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
  EXPECT_EQ(Fields(s),
            std::vector<std::string>{
                "spec.quantization.quark_json.algo_config[0].scaling_layers[0].prev_op"});
  EXPECT_NE(s.violations()[0].description.find("grouped-query attention"), std::string::npos);
}

}  // namespace
}  // namespace quantd::job_spec

namespace quantd::job_spec {
namespace {

// The GGUF float type is checked like every other field: an unknown value,
// or one set for a job that writes no GGUF (it would do nothing).
TEST(JobSpecCheckTest, GgufFloatTypeNeedsAGgufExport) {
  const std::string base = R"pb(
    model_uri: "file:///models/stories260K"
    quantization { scheme: "w_int8_per_channel_sym" }
  )pb";
  EXPECT_TRUE(
      CheckJobSpec(Parse(base + "export { formats: GGUF gguf_float_type: GGUF_BF16 }")).ok());
  Status s = CheckJobSpec(Parse(base + "export { formats: HF_QUARK gguf_float_type: GGUF_F16 }"));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  ASSERT_EQ(Fields(s), std::vector<std::string>{"spec.export.gguf_float_type"});
  EXPECT_EQ(s.violations()[0].description, "applies to the GGUF export only; formats has no GGUF");
  auto spec = Parse(base + "export { formats: GGUF }");
  spec.mutable_export_()->set_gguf_float_type(static_cast<quantd::v1::GgufFloatType>(9));
  s = CheckJobSpec(spec);
  ASSERT_EQ(Fields(s), std::vector<std::string>{"spec.export.gguf_float_type"});
  EXPECT_EQ(s.violations()[0].description, "unknown value 9 (GGUF_F32, GGUF_F16 or GGUF_BF16)");
}

// export.gguf_type: a llama.cpp recipe is the whole quantization, so it
// stands without quantization settings, and needs a GGUF export; every
// field that contradicts it is named at once.
TEST(JobSpecCheckTest, GgufRecipeIsTheQuantization) {
  const std::string model = R"pb(model_uri: "file:///models/stories260K")pb";
  EXPECT_TRUE(CheckJobSpec(Parse(model + "export { formats: GGUF gguf_type: \"Q4_K_M\" }")).ok());
  EXPECT_TRUE(CheckJobSpec(Parse(model + "export { formats: GGUF formats: HF_FAKE_QUANTIZED "
                                         "gguf_type: \"q6_k\" }"))
                  .ok());
  // Without a recipe the quantization settings are required.
  Status s = CheckJobSpec(Parse(model + "export { formats: GGUF }"));
  ASSERT_EQ(Fields(s), std::vector<std::string>{"spec.quantization"});
  EXPECT_NE(s.violations()[0].description.find("export.gguf_type"), std::string::npos);

  s = CheckJobSpec(Parse(model + R"pb(
    quantization { scheme: "w_int4_per_group_sym" }
    export { formats: HF_QUARK gguf_type: "Q4_K_M" gguf_float_type: GGUF_F16 }
  )pb"));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Fields(s),
            (std::vector<std::string>{"spec.export.gguf_float_type", "spec.export.gguf_type",
                                      "spec.export.formats[0]", "spec.quantization"}))
      << s;
  std::map<std::string, std::string> why;
  for (const auto& v : s.violations()) why[v.field] = v.description;
  EXPECT_EQ(why["spec.export.gguf_type"], "names the GGUF file's recipe; formats has no GGUF");
  EXPECT_EQ(why["spec.quantization"],
            "the llama.cpp recipe Q4_K_M (export.gguf_type) quantizes every weight itself, as "
            "llama-quantize does; set only quantization.algorithms (gptq) beside it, or drop "
            "gguf_type to export the job's own codes");
  s = CheckJobSpec(Parse(model + R"pb(
    export { formats: GGUF gguf_type: "Q4_K_M" gguf_float_type: GGUF_F16 }
  )pb"));
  ASSERT_EQ(Fields(s), std::vector<std::string>{"spec.export.gguf_float_type"});
  EXPECT_EQ(s.violations()[0].description,
            "the llama.cpp recipe Q4_K_M (export.gguf_type) chooses every tensor's type; "
            "gguf_float_type applies to jobs that export their own codes");

  s = CheckJobSpec(Parse(model + "export { formats: GGUF gguf_type: \"Q2_K_S\" }"));
  ASSERT_EQ(Fields(s), std::vector<std::string>{"spec.export.gguf_type"});
  EXPECT_EQ(s.violations()[0].description,
            "'Q2_K_S' is not a llama.cpp file type quantd writes (F32, F16, BF16, Q8_0, Q4_0, "
            "Q4_1, Q5_0, Q5_1, Q2_K, Q3_K_S, Q3_K_M, Q3_K_L, Q4_K_S, Q4_K_M, Q5_K_S, Q5_K_M, "
            "Q6_K)");
  // A hostile value is not echoed back.
  auto spec = Parse(model + "export { formats: GGUF }");
  spec.mutable_export_()->set_gguf_type(std::string(100000, 'Q'));
  s = CheckJobSpec(spec);
  ASSERT_EQ(Fields(s), std::vector<std::string>{"spec.export.gguf_type"});
  EXPECT_LT(s.violations()[0].description.size(), 200u);
}

// GPTQ runs with a recipe, quantizing with its block types; the other
// algorithms, act_order without static_groups, and GPTQ without calibration
// data are named.
TEST(JobSpecCheckTest, GgufRecipeTakesGptq) {
  const std::string model = R"pb(model_uri: "file:///models/stories260K")pb";
  const std::string calib = R"pb(calibration { dataset_uri: "file:///data/c.txt" })pb";
  const std::string recipe = R"pb(export { formats: GGUF gguf_type: "Q4_K_M" })pb";
  Status s = CheckJobSpec(Parse(
      model + "quantization { algorithms { gptq { damp_percent: 0.02 } } }" + calib + recipe));
  EXPECT_TRUE(s.ok()) << s;
  s = CheckJobSpec(Parse(model +
                         "quantization { algorithms { gptq { act_order: true static_groups: true } "
                         "} calibrate_on_float_outputs: true }" +
                         calib + recipe));
  EXPECT_TRUE(s.ok()) << s;

  s = CheckJobSpec(Parse(model + R"pb(
                           quantization {
                             algorithms { awq {} }
                             algorithms { gptq { act_order: true } }
                           })pb" +
                         recipe));
  EXPECT_EQ(Fields(s), (std::vector<std::string>{"spec.calibration.dataset_uri",
                                                 "spec.quantization.algorithms[0]",
                                                 "spec.quantization.algorithms[1].gptq.act_order"}))
      << s;
  std::map<std::string, std::string> why;
  for (const auto& v : s.violations()) why[v.field] = v.description;
  EXPECT_EQ(why["spec.quantization.algorithms[0]"],
            "only gptq runs with the llama.cpp recipe Q4_K_M (export.gguf_type): it quantizes "
            "with the recipe's block types; the other algorithms change the float weights the "
            "recipe reads");
  EXPECT_EQ(why["spec.calibration.dataset_uri"],
            "quantization algorithms calibrate on data: set a calibration dataset");

  auto job = ResolveJob(Parse(model + "quantization { algorithms { gptq {} } }" + calib + recipe));
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->quantization.description, "llama.cpp recipe Q4_K_M, gptq");
  ASSERT_EQ(job->quantization.config.algorithms.size(), 1u);
  EXPECT_FALSE(job->quantization.config.global_quant_config.weight.has_value());
}

TEST(JobSpecCheckTest, UnknownCalibrationSamplingIsNamed) {
  auto spec =
      Parse(R"pb(model_uri: "file:///m"
                 quantization { scheme: "w_int8_per_channel_sym" }
                 calibration { dataset_uri: "file:///data/c.txt" sampling: RANDOM_WINDOWS })pb");
  EXPECT_TRUE(CheckJobSpec(spec).ok()) << CheckJobSpec(spec);
  // An enum value a newer client may send (proto3 JSON accepts numbers).
  spec.mutable_calibration()->set_sampling(static_cast<quantd::v1::SamplingMode>(7));
  Status s = CheckJobSpec(spec);
  EXPECT_EQ(Fields(s), std::vector<std::string>{"spec.calibration.sampling"});
  EXPECT_NE(s.message().find("unknown sampling mode 7"), std::string::npos) << s.message();
  // A seed only draws random windows.
  spec.mutable_calibration()->set_sampling(quantd::v1::CONCAT);
  spec.mutable_calibration()->set_seed(5);
  EXPECT_EQ(Fields(CheckJobSpec(spec)), std::vector<std::string>{"spec.calibration.seed"});
  spec.mutable_calibration()->clear_sampling();
  EXPECT_TRUE(CheckJobSpec(spec).ok()) << CheckJobSpec(spec);
}

TEST(JobSpecCheckTest, UnknownCalibrationComputeDtypeIsNamedWithTheOtherMistakes) {
  auto spec = Parse(
      R"pb(model_uri: "file:///m"
           quantization { scheme: "w_int8_per_channel_sym" }
           calibration { dataset_uri: "file:///data/c.txt" compute_dtype: COMPUTE_BFLOAT16 })pb");
  EXPECT_TRUE(CheckJobSpec(spec).ok()) << CheckJobSpec(spec);
  spec.mutable_calibration()->set_compute_dtype(static_cast<quantd::v1::ComputeDtype>(5));
  spec.mutable_calibration()->set_num_samples(0);
  Status s = CheckJobSpec(spec);
  EXPECT_EQ(Fields(s), (std::vector<std::string>{"spec.calibration.num_samples",
                                                 "spec.calibration.compute_dtype"}));
  ASSERT_EQ(s.violations().size(), 2u);
  EXPECT_EQ(s.violations()[1].description,
            "unknown compute dtype 5 (COMPUTE_FLOAT32 or COMPUTE_BFLOAT16)");
}

// spec.export.target vllm, table-driven over every preset on stories260K
// (hidden 64, intermediate 172): what vLLM serves is accepted, the rest is
// refused naming the field and why (vllm_quark_peer_test.sh holds the same
// split to tests/peers/vllm_quark_check.py on the real exports).
TEST(JobSpecCheckTest, TargetVllmRefusesWhatVllmCannotServe) {
  const std::map<std::string, std::string> refused = {
      {"w_bf16", "has no scheme for bfloat16 weights"},
      {"w_fp16", "has no scheme for float16 weights"},
      {"w_fp8_a_fp8_o_fp8", "no kernel for quantized Linear outputs"},
      {"w_fp8_per_channel_sym", "no kernel for quantized Linear outputs"},
      {"w_int2_per_group_asym", "hf_quark cannot express int2"},
      {"w_int4_per_channel_asym", "static per_group only (W4A16)"},
      {"w_int4_per_channel_sym", "static per_group only (W4A16)"},
      {"w_int4_per_group_asym", "asymmetric int4 would decode wrong"},
      {"w_int4_per_group_sym", "out_features 172 is not a multiple of 8"},
      {"w_int8_a_int8_per_tensor_sym_dynamic", "hf_quark cannot express"},
      {"w_int8_per_channel_a_int8_per_tensor_sym_dynamic",
       "int8 inputs static per_tensor or dynamic per-token"},
      {"w_int8_per_channel_sym", "no int8 weight-only scheme"},
      {"w_int8_per_group_sym", "int8 weights static per_tensor or per_channel, not per_group"},
      {"w_int8_per_tensor_sym", "no int8 weight-only scheme"},
      {"w_mxfp4", "no weight-only form"},
      {"w_mxfp4_a_mxfp4", "in_features 172 is not a multiple of 32"},
      {"w_mxfp4_a_mxfp6", "in_features 172 is not a multiple of 32"},
      {"w_mxfp4_a_mxfp6_e2m3", "in_features 172 is not a multiple of 32"},
      {"w_mxfp6_e2m3", "no weight-only form"},
      {"w_mxfp6_e2m3_a_mxfp6_e2m3", "in_features 172 is not a multiple of 32"},
      {"w_mxfp6_e3m2", "no weight-only form"},
      {"w_mxfp6_e3m2_a_mxfp6_e3m2", "in_features 172 is not a multiple of 32"},
      {"w_mxfp8", "has no scheme for mxfp8_e4m3 weights"},
      {"w_mxfp8_a_mxfp8", "has no scheme for mxfp8_e4m3 weights"},
      {"w_mxint8", "hf_quark cannot express"},
      {"w_mxint8_a_mxint8", "hf_quark cannot express"},
      {"w_uint4_per_channel_asym", "static per_group only (W4A16)"},
      {"w_uint4_per_channel_sym", "static per_group only (W4A16)"},
      {"w_uint4_per_group_asym", "out_features 172 is not a multiple of 8"},
      {"w_uint4_per_group_sym", "symmetric uint4 would decode wrong"},
      {"w_uint8_a_uint8_per_tensor_asym", "has no scheme for uint8 weights"},
      {"w_uint8_per_group_asym", "has no scheme for uint8 weights"},
      {"w_uint8_per_tensor_mse", "has no scheme for uint8 weights"},
      {"w_uint8_per_tensor_percentile", "has no scheme for uint8 weights"},
  };
  const std::string model = StoriesModelUri("stories260K-vllm");
  for (const std::string& name : config::PresetNames()) {
    SCOPED_TRACE(name);
    quantd::v1::JobSpec spec;
    spec.set_model_uri(model);
    spec.mutable_calibration()->set_dataset_uri("file:///data/tinystories.txt");
    spec.mutable_quantization()->set_scheme(name);
    if (name.find("per_group") != std::string::npos) spec.mutable_quantization()->set_group_size(4);
    spec.mutable_export_()->add_formats(quantd::v1::HF_QUARK);
    spec.mutable_export_()->set_target(quantd::v1::SERVING_TARGET_VLLM);
    const Status s = CheckJobSpec(spec);
    auto it = refused.find(name);
    if (it == refused.end()) {
      EXPECT_TRUE(s.ok()) << s;
      continue;
    }
    ASSERT_EQ(s.violations().size(), 1u) << s;
    const FieldViolation& v = s.violations()[0];
    EXPECT_TRUE(v.field == "spec.quantization.scheme" || v.field == "spec.export.formats[0]")
        << v.field;
    EXPECT_NE(v.description.find(it->second), std::string::npos) << v.description;
    if (v.field == "spec.quantization.scheme")
      EXPECT_NE(v.description.find("presets vLLM serves for this model as hf_quark: w_fp8_a_fp8, "),
                std::string::npos)
          << v.description;
    // Under the default target the same job is accepted (or refused for the
    // format alone), and says nothing of vLLM.
    spec.mutable_export_()->clear_target();
    const Status any = CheckJobSpec(spec);
    EXPECT_EQ(any.message().find("vllm"), std::string::npos) << any;
  }
}

// Trying every preset for the suggestion is bounded by the check's budget:
// past it the refusal still says why, and that the listing stopped.
TEST(JobSpecCheckTest, TargetVllmPresetListingStopsAtTheBudget) {
  auto spec = Parse(R"pb(
    model_uri: "file:///m"
    quantization { scheme: "w_int8_per_channel_sym" }
    export { formats: HF_QUARK target: SERVING_TARGET_VLLM }
  )pb");
  auto resolved = config::ResolveQuantizationSettings(spec.quantization());
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  const auto v = CheckServingTarget(spec, *resolved, {exporter::ExportFormat::kHfQuark},
                                    std::nullopt, Deadline::After(std::chrono::milliseconds(0)));
  ASSERT_EQ(v.size(), 1u);
  EXPECT_NE(v[0].description.find("no int8 weight-only scheme"), std::string::npos);
  EXPECT_NE(v[0].description.find("trying the presets for this model stopped at the check's "
                                  "budget of 0 ms"),
            std::string::npos)
      << v[0].description;
}

TEST(JobSpecCheckTest, TargetVllmNamesFormatsVllmDoesNotRead) {
  auto spec = Parse(R"pb(
    model_uri: "file:///m"
    quantization { scheme: "w_fp8_per_channel_a_fp8_per_token_dynamic" }
    export { formats: GGUF formats: HF_QUARK formats: ONNX_QDQ target: SERVING_TARGET_VLLM }
  )pb");
  Status s = CheckJobSpec(spec);
  EXPECT_EQ(Fields(s), (std::vector<std::string>{"spec.export.formats[0]",
                                                 "spec.export.formats[2]"}));
  EXPECT_EQ(s.violations()[0].description,
            "target vllm: vLLM serves hf_quark and compressed_tensors exports; gguf is for llama.cpp");
  spec.mutable_export_()->clear_formats();
  EXPECT_EQ(Fields(CheckJobSpec(spec)), std::vector<std::string>{"spec.export.formats"});
  spec.mutable_export_()->set_target(static_cast<quantd::v1::ServingTarget>(7));
  EXPECT_EQ(Fields(CheckJobSpec(spec)), std::vector<std::string>{"spec.export.target"});
}

// The onnx export of a TorchScript model writes weights ONNX has no type for
// as fake-quantized floats: only its activation quantizers are held to
// onnx_qdq's rules (worker/torchscript/script_onnx_export.h).
TEST(JobSpecCheckTest, OnnxOfATorchScriptModelChecksItsActivationsOnly) {
  const std::string pt = std::string(std::getenv("TEST_TMPDIR")) + "/model.pt";
  std::ofstream(pt, std::ios::binary) << std::string("PK\x03\x04", 4) << "rest of a zip";
  auto spec = Parse(R"pb(
    quantization { scheme: "w_mxfp4" }
    export { formats: ONNX_QDQ }
  )pb");
  spec.set_model_uri("file://" + pt);
  EXPECT_TRUE(CheckJobSpec(spec).ok()) << CheckJobSpec(spec);
  spec.mutable_quantization()->set_scheme("w_int8_a_int8_per_token_dynamic");
  Status s = CheckJobSpec(spec);
  EXPECT_EQ(Fields(s), std::vector<std::string>{"spec.export.formats[0]"}) << s;
  EXPECT_NE(s.message().find("dynamic quantization has no static QuantizeLinear"),
            std::string::npos)
      << s;
}

}  // namespace
}  // namespace quantd::job_spec
