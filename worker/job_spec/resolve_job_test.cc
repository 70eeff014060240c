// ResolveJob is the one road: quantd's CreateJob check (CheckJobSpec, as
// server/main.cc calls it) and the worker (ResolveJob, as PipelineExecutor
// and quantd-quantize call it) give the same answer for every spec, good or
// bad, and the resolved value is what the separate steps used to produce.
#include "worker/job_spec/resolve_job.h"

#include <string>
#include <vector>

#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "worker/config/quark_json.h"
#include "worker/job_spec/config_proto.h"

namespace quantd::job_spec {
namespace {

quantd::v1::JobSpec Parse(const std::string& text) {
  quantd::v1::JobSpec spec;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &spec)) << text;
  return spec;
}

const char* const kGoodSpecs[] = {
    R"pb(model_uri: "file:///m" quantization { scheme: "w_int4_per_group_sym" group_size: 32 })pb",
    R"pb(model_uri: "file:///m"
         quantization { scheme: "w_int4_per_group_sym" group_size: 32 exclude: "model.layers.0" }
         calibration { dataset_uri: "file:///c.txt" num_samples: 8 seq_len: 64 sampling: CONCAT }
         evaluation { dataset_uri: "file:///e.txt" n_ctx: 128 max_windows: 4
                      max_perplexity_increase: 0.5 max_kl_divergence: 0.25 }
         export { formats: GGUF formats: HF_FAKE_QUANTIZED gguf_float_type: GGUF_BF16
                  output_uri: "file:///out" overwrite: true })pb",
    R"pb(model_uri: "file:///m"
         quantization { quark_json: '{"quant_method": "quark_online", "global_quant_config": {"weight": {"dtype": "int8", "qscheme": "per_channel", "ch_axis": 0, "symmetric": true, "is_dynamic": false}}, "exclude": ["lm_head"], "export": {"kv_cache_group": [], "min_kv_scale": 0.0, "weight_format": "real_quantized", "pack_method": "reorder"}, "version": "0.9"}' }
         evaluation { disabled: true })pb",
    R"pb(model_uri: "file:///m"
         quantization { quark_json: '{"global_quant_config": {"weight": {"dtype": "uint4", "qscheme": "per_group", "group_size": 64, "ch_axis": -1, "symmetric": false, "is_dynamic": false}}, "softmax_quant_spec": {"dtype": "fp8_e4m3"}}' }
         calibration { dataset_uri: "file:///c.txt" sampling: RANDOM_WINDOWS seed: 7 })pb",
    R"pb(model_uri: "file:///m"
         quantization {
           config {
             global_quant_config { weight { dtype: INT8 qscheme: PER_CHANNEL ch_axis: 0 } }
             kv_cache_quant_config {
               pattern: "*k_proj"
               config { output_tensors { dtype: FP8_E4M3 qscheme: PER_TENSOR } }
             }
             min_kv_scale: 0.001
           }
           calibrate_on_float_outputs: true
         }
         calibration { dataset_uri: "file:///c.txt" text_field: "body" })pb",
    R"pb(model_uri: "file:///m" quantization { scheme: "w_fp8_a_fp8" fp8_kv_cache: true }
         calibration { dataset_uri: "file:///c.txt" })pb",
};

const char* const kBadSpecs[] = {
    R"pb(model_uri: "models/relative" quantization { scheme: "w_int5_magic" group_size: -4 }
         evaluation { n_ctx: 1 max_windows: -1 } device: "tpu" max_attempts: 0)pb",
    R"pb(model_uri: "https://example.com/m" quantization { scheme: "w_int8_per_tensor_sym" })pb",
    R"pb(model_uri: "file:///m" quantization { quark_json: '{"global_quant_config": {"weight": {"dtype": "int9"}}}' }
         export { formats: HF_QUARK gguf_float_type: GGUF_F16 })pb",
    R"pb(model_uri: "file:///m" quantization { scheme: "w_fp8_a_fp8" fp8_kv_cache: true })pb",
    R"pb(model_uri: "file:///m" quantization { scheme: "w_int8_per_tensor_sym" }
         export { formats: 99 })pb",
};

void ExpectSameStatus(const Status& a, const Status& b, const std::string& spec) {
  EXPECT_EQ(a.code(), b.code()) << spec;
  EXPECT_EQ(a.message(), b.message()) << spec;
  EXPECT_EQ(a.reason(), b.reason()) << spec;
  ASSERT_EQ(a.violations().size(), b.violations().size()) << spec;
  for (size_t i = 0; i < a.violations().size(); ++i) {
    EXPECT_EQ(a.violations()[i].field, b.violations()[i].field) << spec;
    EXPECT_EQ(a.violations()[i].description, b.violations()[i].description) << spec;
  }
}

TEST(ResolveJobTest, ServerAndWorkerGiveTheSameAnswerForEverySpec) {
  std::vector<const char*> specs(std::begin(kGoodSpecs), std::end(kGoodSpecs));
  specs.insert(specs.end(), std::begin(kBadSpecs), std::end(kBadSpecs));
  for (const char* text : specs) {
    const quantd::v1::JobSpec spec = Parse(text);
    std::vector<std::string> server_warnings;
    const Status server = CheckJobSpec(spec, &server_warnings);
    const StatusOr<ResolvedJob> worker = ResolveJob(spec);
    ExpectSameStatus(server, worker.status(), text);
    if (worker.ok()) EXPECT_EQ(server_warnings, worker->warnings) << text;
  }
}

TEST(ResolveJobTest, GoodSpecsResolveAndBadOnesAreRefused) {
  for (const char* text : kGoodSpecs) {
    const StatusOr<ResolvedJob> job = ResolveJob(Parse(text));
    EXPECT_TRUE(job.ok()) << text << "\n" << job.status();
  }
  for (const char* text : kBadSpecs) {
    const StatusOr<ResolvedJob> job = ResolveJob(Parse(text));
    EXPECT_FALSE(job.ok()) << text;
  }
}

// The reference JSON as the worker wrote it before ResolveJob: written,
// parsed again, patched and dumped.
std::string RoundTripQuarkJson(const config::QuantConfig& c) {
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(config::WriteQuarkJson(c, -1));
  if (!j.contains("export") || !j["export"].is_object())
    j["export"] = nlohmann::ordered_json::object();
  j["export"]["weight_format"] = "fake_quantized";
  return j.dump();
}

TEST(ResolveJobTest, QuantizationIsTheSettingsResolvedOnceAndWrittenOnce) {
  for (const char* text : kGoodSpecs) {
    const quantd::v1::JobSpec spec = Parse(text);
    const StatusOr<ResolvedJob> job = ResolveJob(spec);
    ASSERT_TRUE(job.ok()) << job.status();
    const StatusOr<ResolvedQuantization> alone = ResolveQuantization(spec.quantization());
    ASSERT_TRUE(alone.ok()) << alone.status();
    EXPECT_EQ(job->quantization.config, alone->config) << text;
    EXPECT_EQ(job->quantization.description, alone->description) << text;
    EXPECT_EQ(job->quantization.kv_cache, alone->kv_cache) << text;
    EXPECT_EQ(job->quantization.min_kv_scale, alone->min_kv_scale) << text;
    // Byte for byte what the parse-and-patch round trip wrote, so resume
    // fingerprints are unchanged; exporters take the same value unparsed.
    const std::string written =
        config::WriteQuarkJsonForExport(job->quantization.config, "fake_quantized");
    EXPECT_EQ(written, RoundTripQuarkJson(job->quantization.config)) << text;
    EXPECT_EQ(config::QuarkJsonForExport(job->quantization.config, "fake_quantized"),
              nlohmann::json::parse(written))
        << text;
  }
}

TEST(ResolveJobTest, SettingsBecomeEngineTypes) {
  const StatusOr<ResolvedJob> job = ResolveJob(Parse(kGoodSpecs[1]));
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->model_uri, "file:///m");
  EXPECT_EQ(job->calibration.dataset_uri, "file:///c.txt");
  EXPECT_EQ(job->calibration.num_samples, 8);
  EXPECT_EQ(job->calibration.seq_len, 64);
  EXPECT_EQ(job->calibration.sampling, io::SamplingMethod::kConcat);
  EXPECT_FALSE(job->calibration.text_field.has_value());
  EXPECT_TRUE(job->evaluation.enabled());
  EXPECT_EQ(job->evaluation.n_ctx, 128);
  EXPECT_EQ(job->evaluation.max_windows, 4);
  EXPECT_EQ(job->evaluation.max_perplexity_increase, 0.5);
  EXPECT_EQ(job->evaluation.max_kl_divergence, 0.25);
  EXPECT_EQ(job->export_settings.formats,
            (std::vector<exporter::ExportFormat>{exporter::ExportFormat::kGguf,
                                                 exporter::ExportFormat::kHfFakeQuantized}));
  EXPECT_EQ(job->export_settings.gguf_float_type, gguf::GgmlType::kBF16);
  EXPECT_EQ(job->export_settings.output_uri, "file:///out");
  EXPECT_TRUE(job->export_settings.overwrite);
  EXPECT_FALSE(job->quantization.kv_cache.has_value());

  const StatusOr<ResolvedJob> fp8 = ResolveJob(Parse(kGoodSpecs[5]));
  ASSERT_TRUE(fp8.ok()) << fp8.status();
  ASSERT_TRUE(fp8->quantization.kv_cache.has_value());
  EXPECT_EQ(fp8->quantization.kv_cache->dtype, quant::DataType::kFp8E4M3);
  EXPECT_EQ(fp8->quantization.kv_cache->qscheme, quant::QScheme::kPerTensor);

  // Unset fields keep the engine's defaults: nothing is filled in here.
  const StatusOr<ResolvedJob> plain = ResolveJob(Parse(kGoodSpecs[0]));
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_FALSE(plain->calibration.num_samples.has_value());
  EXPECT_FALSE(plain->calibration.sampling.has_value());
  EXPECT_FALSE(plain->evaluation.enabled());
  EXPECT_EQ(plain->export_settings.formats,
            std::vector<exporter::ExportFormat>{exporter::ExportFormat::kHfFakeQuantized});
  EXPECT_EQ(plain->export_settings.gguf_float_type, gguf::GgmlType::kF32);
  EXPECT_EQ(plain->quantization.description, "w_int4_per_group_sym (group 32)");

  // A llama.cpp recipe alone: an empty config (the recipe quantizes the
  // weights as the model loads), described by the recipe's name.
  const StatusOr<ResolvedJob> recipe = ResolveJob(Parse(R"pb(
    model_uri: "file:///models/stories260K"
    export { formats: GGUF gguf_type: "q4_k_m" }
  )pb"));
  ASSERT_TRUE(recipe.ok()) << recipe.status();
  EXPECT_EQ(recipe->export_settings.gguf_recipe, gguf::GgufFileType::kQ4_K_M);
  EXPECT_EQ(recipe->quantization.description, "llama.cpp recipe q4_k_m");
  EXPECT_FALSE(recipe->quantization.config.global_quant_config.weight.has_value());
  EXPECT_FALSE(recipe->quantization.planner("model.layers.0.mlp.up_proj", "Linear").quantized());
  EXPECT_FALSE(plain->export_settings.gguf_recipe.has_value());

  const StatusOr<ResolvedJob> quark = ResolveJob(Parse(kGoodSpecs[2]));
  ASSERT_TRUE(quark.ok()) << quark.status();
  EXPECT_FALSE(quark->warnings.empty());  // quark_online is read as quark
  EXPECT_TRUE(quark->evaluation.disabled);
}

// Names come from tenants and need not be valid UTF-8 (quantd-quantize takes
// them from argv; a proto built in process is not checked). Writing the
// reference JSON must not throw on them: the job spec fuzzer found
// ResolveJob aborting on an exclude glob holding the byte 0xDA.
TEST(ResolveJobTest, NamesThatAreNotUtf8AreWrittenNotThrown) {
  quantd::v1::JobSpec spec = Parse(kGoodSpecs[0]);
  spec.mutable_quantization()->add_exclude(std::string("model.layers.0\xda*"));
  StatusOr<ResolvedJob> job = ResolveJob(spec);
  ASSERT_TRUE(job.ok()) << job.status();
  const std::string text =
      config::WriteQuarkJsonForExport(job->quantization.config, "fake_quantized");
  const nlohmann::json written = nlohmann::json::parse(text);
  bool replaced = false;
  for (const auto& e : written.at("exclude")) {
    replaced |= e.get<std::string>() == "model.layers.0\xef\xbf\xbd*";  // U+FFFD
  }
  EXPECT_TRUE(replaced) << text;
}

}  // namespace
}  // namespace quantd::job_spec
