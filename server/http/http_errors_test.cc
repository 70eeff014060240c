#include "server/http/http_errors.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "server/common/errors.h"
#include "server/grpc/status_conversion.h"

namespace quantd::server::http {
namespace {

TEST(HttpErrorsTest, CodeMappingFollowsCodeProto) {
  const std::pair<grpc::StatusCode, int> expected[] = {
      {grpc::StatusCode::OK, 200},
      {grpc::StatusCode::CANCELLED, 499},
      {grpc::StatusCode::UNKNOWN, 500},
      {grpc::StatusCode::INVALID_ARGUMENT, 400},
      {grpc::StatusCode::DEADLINE_EXCEEDED, 504},
      {grpc::StatusCode::NOT_FOUND, 404},
      {grpc::StatusCode::ALREADY_EXISTS, 409},
      {grpc::StatusCode::PERMISSION_DENIED, 403},
      {grpc::StatusCode::RESOURCE_EXHAUSTED, 429},
      {grpc::StatusCode::FAILED_PRECONDITION, 400},
      {grpc::StatusCode::ABORTED, 409},
      {grpc::StatusCode::OUT_OF_RANGE, 400},
      {grpc::StatusCode::UNIMPLEMENTED, 501},
      {grpc::StatusCode::INTERNAL, 500},
      {grpc::StatusCode::UNAVAILABLE, 503},
      {grpc::StatusCode::DATA_LOSS, 500},
      {grpc::StatusCode::UNAUTHENTICATED, 401},
  };
  for (const auto& [code, http] : expected) {
    EXPECT_EQ(HttpStatusForCode(code), http) << CodeName(code);
  }
  EXPECT_STREQ(CodeName(grpc::StatusCode::FAILED_PRECONDITION), "FAILED_PRECONDITION");
}

TEST(HttpErrorsTest, JsonCarriesReasonAndViolations) {
  quantd::Status status = InvalidRequestError(
      {{"spec.model_uri", "must not be empty"}, {"labels[\"Bad\"]", "bad key"}});
  nlohmann::json body = nlohmann::json::parse(ErrorJson(400, ToGrpcStatus(status)));
  const nlohmann::json& error = body.at("error");
  EXPECT_EQ(error.at("code"), 400);
  EXPECT_EQ(error.at("status"), "INVALID_ARGUMENT");
  EXPECT_EQ(error.at("message"), status.message());
  ASSERT_EQ(error.at("details").size(), 2u);
  EXPECT_EQ(error.at("details")[0].at("@type"), "type.googleapis.com/google.rpc.ErrorInfo");
  EXPECT_EQ(error.at("details")[0].at("reason"), "INVALID_ARGUMENT");
  EXPECT_EQ(error.at("details")[0].at("domain"), "quantd");
  EXPECT_EQ(error.at("details")[1].at("@type"), "type.googleapis.com/google.rpc.BadRequest");
  const nlohmann::json& v = error.at("details")[1].at("fieldViolations");
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v[0].at("field"), "spec.model_uri");
  EXPECT_EQ(v[1].at("description"), "bad key");
}

TEST(HttpErrorsTest, PlainStatusAndBrokenDetails) {
  nlohmann::json body = nlohmann::json::parse(
      ErrorJson(503, grpc::Status(grpc::StatusCode::UNAVAILABLE, "down \xff")));
  EXPECT_EQ(body["error"]["status"], "UNAVAILABLE");
  EXPECT_TRUE(body["error"]["details"].empty());
  body = nlohmann::json::parse(
      ErrorJson(500, grpc::Status(grpc::StatusCode::INTERNAL, "x", "not a proto \x01\x02")));
  EXPECT_EQ(body["error"]["code"], 500);
}

}  // namespace
}  // namespace quantd::server::http
