#include "server/grpc/status_conversion.h"

#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "gtest/gtest.h"
#include "server/common/errors.h"
#include "worker/common/status.h"

namespace quantd::server {
namespace {

TEST(StatusConversionTest, OkIsOk) {
  EXPECT_TRUE(ToGrpcStatus(quantd::OkStatus()).ok());
  EXPECT_TRUE(FromGrpcStatus(grpc::Status::OK).ok());
}

TEST(StatusConversionTest, BadRequestBecomesErrorInfoThenBadRequestDetails) {
  quantd::Status s =
      InvalidRequestError({{"spec.model_uri", "required"}, {"request_id", "too long"}});
  grpc::Status g = ToGrpcStatus(s);
  EXPECT_EQ(g.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(g.error_message(), s.message());
  google::rpc::Status proto;
  ASSERT_TRUE(proto.ParseFromString(g.error_details()));
  EXPECT_EQ(proto.code(), 3);
  EXPECT_EQ(proto.message(), s.message());
  ASSERT_EQ(proto.details_size(), 2);
  google::rpc::ErrorInfo info;
  ASSERT_TRUE(proto.details(0).UnpackTo(&info));
  EXPECT_EQ(info.reason(), "INVALID_ARGUMENT");
  EXPECT_EQ(info.domain(), "quantd");
  google::rpc::BadRequest bad;
  ASSERT_TRUE(proto.details(1).UnpackTo(&bad));
  ASSERT_EQ(bad.field_violations_size(), 2);
  EXPECT_EQ(bad.field_violations(0).field(), "spec.model_uri");
  EXPECT_EQ(bad.field_violations(1).description(), "too long");

  quantd::Status back = FromGrpcStatus(g);
  EXPECT_EQ(back.code(), quantd::StatusCode::kInvalidArgument);
  EXPECT_EQ(back.reason(), "INVALID_ARGUMENT");
  EXPECT_EQ(back.violations(), s.violations());
}

TEST(StatusConversionTest, ErrorWithoutReasonGetsTheCodeName) {
  grpc::Status g = ToGrpcStatus(quantd::InternalError("disk on fire"));
  google::rpc::Status proto;
  ASSERT_TRUE(proto.ParseFromString(g.error_details()));
  ASSERT_EQ(proto.details_size(), 1);
  google::rpc::ErrorInfo info;
  ASSERT_TRUE(proto.details(0).UnpackTo(&info));
  EXPECT_EQ(info.reason(), "INTERNAL");
}

TEST(StatusConversionTest, ReasonIsKept) {
  quantd::Status s = MakeError(quantd::StatusCode::kFailedPrecondition, "STALE_LEASE", "stale");
  quantd::Status back = FromGrpcStatus(ToGrpcStatus(s));
  EXPECT_EQ(back.code(), quantd::StatusCode::kFailedPrecondition);
  EXPECT_EQ(back.message(), "stale");
  EXPECT_EQ(back.reason(), "STALE_LEASE");
  // A status from a server without details still converts.
  quantd::Status plain = FromGrpcStatus(grpc::Status(grpc::StatusCode::UNAVAILABLE, "down"));
  EXPECT_EQ(plain.code(), quantd::StatusCode::kUnavailable);
  EXPECT_EQ(plain.reason(), "");
}

}  // namespace
}  // namespace quantd::server
