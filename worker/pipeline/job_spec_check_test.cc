#include "worker/pipeline/job_spec_check.h"

#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace quantd::pipeline {
namespace {

quantd::v1::JobSpec Parse(const std::string& text) {
  quantd::v1::JobSpec spec;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &spec)) << text;
  return spec;
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
  EXPECT_NE(s.message().find("(and 6 more)"), std::string::npos) << s.message();
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

TEST(JobSpecCheckTest, UnbuiltFeaturesAreUnimplementedNotIgnored) {
  auto spec = Parse(R"pb(
    model_uri: "file:///m"
    quantization { scheme: "w_int8_per_channel_sym" }
    export { formats: HF_FAKE_QUANTIZED formats: GGUF }
  )pb");
  Status s = CheckJobSpec(spec);
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  EXPECT_EQ(s.reason(), "FEATURE_NOT_BUILT");
  EXPECT_NE(s.message().find("spec.export.formats[1]"), std::string::npos) << s.message();
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

}  // namespace
}  // namespace quantd::pipeline
