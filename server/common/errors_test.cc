#include "server/common/errors.h"

#include "gtest/gtest.h"
#include "worker/common/status.h"

namespace quantd::server {
namespace {

TEST(ErrorsTest, ReasonRoundTrips) {
  quantd::Status s = MakeError(quantd::StatusCode::kFailedPrecondition, "STALE_LEASE", "old token");
  EXPECT_EQ(s.code(), quantd::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "old token");
  EXPECT_EQ(s.reason(), "STALE_LEASE");
  EXPECT_TRUE(s.violations().empty());
  SetReason(s, "OTHER");
  EXPECT_EQ(s.reason(), "OTHER");
  SetReason(s, "");
  EXPECT_EQ(s.reason(), "OTHER");
}

TEST(ErrorsTest, InvalidRequestListsEveryViolation) {
  quantd::Status s = InvalidRequestError(
      {{"spec.model_uri", "must not be empty"}, {"request_id", "at most 128 characters"}});
  EXPECT_EQ(s.code(), quantd::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.reason(), "INVALID_ARGUMENT");
  EXPECT_EQ(s.message(),
            "invalid request (2 violations): spec.model_uri: must not be empty; request_id: at "
            "most 128 characters");
  EXPECT_EQ(InvalidRequestError({{"spec.model_uri", "must not be empty"}}).message(),
            "invalid request: spec.model_uri: must not be empty");
  std::vector<FieldViolation> expected = {{"spec.model_uri", "must not be empty"},
                                          {"request_id", "at most 128 characters"}};
  EXPECT_EQ(s.violations(), expected);
  AddViolations(s, {{"page_size", "negative"}});
  EXPECT_EQ(s.violations().size(), 3u);
  EXPECT_EQ(s.violations()[2].field, "page_size");
}

TEST(ErrorsTest, OkStatusGetsNoPayload) {
  quantd::Status s;
  SetReason(s, "X");
  AddViolations(s, {{"a", "b"}});
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.reason(), "");
  EXPECT_TRUE(s.violations().empty());
}

// The one table of code names (worker/common/status.h) names what the
// server's own table used to.
TEST(ErrorsTest, CodeNames) {
  EXPECT_STREQ(StatusCodeName(quantd::StatusCode::kResourceExhausted), "RESOURCE_EXHAUSTED");
  EXPECT_STREQ(StatusCodeName(quantd::StatusCode::kUnauthenticated), "UNAUTHENTICATED");
}

// What the engine returns (the spec check) keeps its code, reason and
// violations on the server: it is the same type, nothing converts it.
TEST(ErrorsTest, EngineStatusKeepsCodeReasonAndViolations) {
  quantd::Status engine = quantd::UnimplementedError("GPTQ is not built yet");
  engine.WithReason("FEATURE_NOT_BUILT");
  engine.AddViolation("spec.quantization.algorithms[0].gptq", "not built yet");
  quantd::Status s = engine;
  AddViolations(s, {});
  EXPECT_EQ(s.code(), quantd::StatusCode::kUnimplemented);
  EXPECT_EQ(s.message(), "GPTQ is not built yet");
  EXPECT_EQ(s.reason(), "FEATURE_NOT_BUILT");
  ASSERT_EQ(s.violations().size(), 1u);
  EXPECT_EQ(s.violations()[0].field, "spec.quantization.algorithms[0].gptq");
}

}  // namespace
}  // namespace quantd::server
