#include "server/common/errors.h"

#include "gtest/gtest.h"
#include "server/common/engine_status.h"

namespace quantd::server {
namespace {

TEST(ErrorsTest, ReasonRoundTrips) {
  absl::Status s = MakeError(absl::StatusCode::kFailedPrecondition, "STALE_LEASE", "old token");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "old token");
  EXPECT_EQ(GetReason(s), "STALE_LEASE");
  EXPECT_TRUE(GetViolations(s).empty());
  SetReason(s, "OTHER");
  EXPECT_EQ(GetReason(s), "OTHER");
}

TEST(ErrorsTest, InvalidRequestListsEveryViolation) {
  absl::Status s = InvalidRequestError(
      {{"spec.model_uri", "must not be empty"}, {"request_id", "at most 128 characters"}});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GetReason(s), "INVALID_ARGUMENT");
  EXPECT_EQ(s.message(),
            "invalid request (2 violations): spec.model_uri: must not be empty; request_id: at "
            "most 128 characters");
  EXPECT_EQ(InvalidRequestError({{"spec.model_uri", "must not be empty"}}).message(),
            "invalid request: spec.model_uri: must not be empty");
  std::vector<FieldViolation> expected = {{"spec.model_uri", "must not be empty"},
                                          {"request_id", "at most 128 characters"}};
  EXPECT_EQ(GetViolations(s), expected);
  AddViolations(s, {{"page_size", "negative"}});
  EXPECT_EQ(GetViolations(s).size(), 3u);
  EXPECT_EQ(GetViolations(s)[2].field, "page_size");
}

TEST(ErrorsTest, OkStatusGetsNoPayload) {
  absl::Status s;
  SetReason(s, "X");
  AddViolations(s, {{"a", "b"}});
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(GetReason(s), "");
}

TEST(ErrorsTest, CodeNames) {
  EXPECT_EQ(CodeName(absl::StatusCode::kResourceExhausted), "RESOURCE_EXHAUSTED");
  EXPECT_EQ(CodeName(absl::StatusCode::kUnauthenticated), "UNAUTHENTICATED");
}

TEST(EngineStatusTest, KeepsCodeReasonAndViolations) {
  quantd::Status engine = quantd::UnimplementedError("GPTQ is not built yet");
  engine.WithReason("FEATURE_NOT_BUILT");
  engine.AddViolation("spec.quantization.algorithms[0].gptq", "not built yet");
  absl::Status s = FromEngineStatus(engine);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(s.message(), "GPTQ is not built yet");
  EXPECT_EQ(GetReason(s), "FEATURE_NOT_BUILT");
  ASSERT_EQ(GetViolations(s).size(), 1u);
  EXPECT_EQ(GetViolations(s)[0].field, "spec.quantization.algorithms[0].gptq");
  EXPECT_TRUE(FromEngineStatus(quantd::OkStatus()).ok());
}

}  // namespace
}  // namespace quantd::server
