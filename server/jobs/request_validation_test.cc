#include "server/jobs/request_validation.h"

#include "gtest/gtest.h"
#include "server/jobs/page_token.h"
#include "worker/common/status.h"

namespace quantd::server {
namespace {

std::vector<std::string> Fields(const std::vector<FieldViolation>& violations) {
  std::vector<std::string> fields;
  for (const auto& v : violations) fields.push_back(v.field);
  return fields;
}

v1::CreateJobRequest ValidCreate() {
  v1::CreateJobRequest request;
  request.set_request_id("req-1");
  request.mutable_spec()->set_model_uri("file:///models/m");
  (*request.mutable_spec()->mutable_labels())["team"] = "nlp";
  return request;
}

TEST(ValidateCreateJobRequestTest, ValidRequestHasNoViolations) {
  EXPECT_TRUE(ValidateCreateJobRequest(ValidCreate()).empty());
  v1::CreateJobRequest no_request_id = ValidCreate();
  no_request_id.clear_request_id();
  EXPECT_TRUE(ValidateCreateJobRequest(no_request_id).empty());
}

TEST(ValidateCreateJobRequestTest, MissingSpec) {
  v1::CreateJobRequest request;
  EXPECT_EQ(Fields(ValidateCreateJobRequest(request)), std::vector<std::string>{"spec"});
}

TEST(ValidateCreateJobRequestTest, NamesEveryBadField) {
  v1::CreateJobRequest request = ValidCreate();
  request.set_request_id(std::string(129, 'r'));
  request.mutable_spec()->clear_model_uri();
  request.mutable_spec()->set_device("tpu");
  request.mutable_spec()->set_max_attempts(0);
  (*request.mutable_spec()->mutable_labels())["Bad Key"] = "v";
  (*request.mutable_spec()->mutable_labels())["ok"] = "line\nbreak";
  EXPECT_EQ(Fields(ValidateCreateJobRequest(request)),
            (std::vector<std::string>{"request_id", "spec.model_uri", "spec.device",
                                      "spec.labels[\"Bad Key\"]", "spec.labels[\"ok\"]",
                                      "spec.max_attempts"}));
  request.set_request_id(std::string(128, 'r'));
  EXPECT_EQ(Fields(ValidateCreateJobRequest(request))[0], "spec.model_uri");
}

TEST(ValidateCreateJobRequestTest, Devices) {
  for (const char* ok : {"", "cpu", "cuda", "cuda:0", "cuda:15"}) {
    EXPECT_EQ(CheckJobDevice(ok), "") << ok;
  }
  for (const char* bad : {"gpu", "cuda:", "cuda:x", "CPU", "cuda:12345", "cpu:0"}) {
    EXPECT_NE(CheckJobDevice(bad), "") << bad;
  }
  EXPECT_EQ(CheckWorkerDevice("cuda:1"), "");
  EXPECT_NE(CheckWorkerDevice(""), "");
}

TEST(ValidateCreateJobRequestTest, LabelKeysAndValues) {
  EXPECT_EQ(CheckLabelKey("app.kubernetes.io/name"), "");
  EXPECT_EQ(CheckLabelKey("a"), "");
  EXPECT_NE(CheckLabelKey(""), "");
  EXPECT_NE(CheckLabelKey("-a"), "");
  EXPECT_NE(CheckLabelKey(std::string(64, 'a')), "");
  EXPECT_EQ(CheckLabelValue(""), "");
  EXPECT_NE(CheckLabelValue(std::string(257, 'v')), "");
}

TEST(ValidateListJobsRequestTest, PageSizeOrderStatesLabels) {
  v1::ListJobsRequest request;
  EXPECT_TRUE(ValidateListJobsRequest(request).empty());
  request.set_page_size(-1);
  request.set_order_by("name desc");
  request.add_states(v1::JOB_STATE_UNSPECIFIED);
  request.add_states(static_cast<v1::JobState>(42));
  (*request.mutable_labels())["UPPER"] = "x";
  EXPECT_EQ(Fields(ValidateListJobsRequest(request)),
            (std::vector<std::string>{"page_size", "order_by", "states[0]", "states[1]",
                                      "labels[\"UPPER\"]"}));
}

TEST(ValidateListJobsRequestTest, PageSizeDefaultsAndCap) {
  EXPECT_EQ(EffectivePageSize(0), 50);
  EXPECT_EQ(EffectivePageSize(7), 7);
  EXPECT_EQ(EffectivePageSize(500), 500);
  EXPECT_EQ(EffectivePageSize(501), 500);
}

TEST(ValidateListJobsRequestTest, OrderBy) {
  EXPECT_FALSE(OrderAscending(""));
  EXPECT_FALSE(OrderAscending("create_time desc"));
  EXPECT_TRUE(OrderAscending("create_time asc"));
  EXPECT_TRUE(OrderAscending("  Create_Time   ASC "));
  EXPECT_TRUE(OrderAscending("create_time"));
}

TEST(PageTokenTest, RoundTripsAndRejectsTampering) {
  v1::ListJobsRequest request;
  request.add_states(v1::QUEUED);
  (*request.mutable_labels())["team"] = "nlp";
  const uint64_t fp = ListQueryFingerprint(request);
  PageToken token{absl::FromUnixMicros(1700000000123456), "jobs/01abc", fp};
  std::string encoded = EncodePageToken(token);
  auto decoded = DecodePageToken(encoded, fp);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->create_time, token.create_time);
  EXPECT_EQ(decoded->name, "jobs/01abc");

  auto garbage = DecodePageToken("not-a-token!", fp);
  EXPECT_EQ(garbage.status().code(), quantd::StatusCode::kInvalidArgument);
  EXPECT_EQ(garbage.status().reason(), "INVALID_PAGE_TOKEN");
  EXPECT_EQ(garbage.status().violations()[0].field, "page_token");
  EXPECT_FALSE(DecodePageToken(encoded.substr(0, encoded.size() / 2), fp).ok());

  // The same token with another filter or order is refused.
  v1::ListJobsRequest other = request;
  other.set_order_by("create_time asc");
  EXPECT_NE(ListQueryFingerprint(other), fp);
  EXPECT_EQ(DecodePageToken(encoded, ListQueryFingerprint(other)).status().code(),
            quantd::StatusCode::kInvalidArgument);
  // Order of states and labels does not matter, and page_size is not part of it.
  v1::ListJobsRequest same;
  (*same.mutable_labels())["team"] = "nlp";
  same.add_states(v1::QUEUED);
  same.add_states(v1::QUEUED);
  same.set_page_size(3);
  EXPECT_EQ(ListQueryFingerprint(same), fp);
}

}  // namespace
}  // namespace quantd::server
