#include "worker/common/status.h"

#include <memory>
#include <string>

#include "gtest/gtest.h"

namespace quantd {
namespace {

StatusOr<int> Half(int x) {
  if (x % 2 != 0) return InvalidArgumentError("odd: " + std::to_string(x));
  return x / 2;
}

StatusOr<int> Quarter(int x) {
  QD_ASSIGN_OR_RETURN(int h, Half(x));
  QD_ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

Status CheckEven(int x) {
  QD_RETURN_IF_ERROR(Half(x));
  return OkStatus();
}

TEST(StatusTest, CarriesCodeMessageReasonAndViolations) {
  Status s = InvalidArgumentError("bad config").WithReason("INVALID_CONFIG");
  s.AddViolation("a.b", "must be positive").AddViolation("c", "unknown dtype 'int5'");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.reason(), "INVALID_CONFIG");
  ASSERT_EQ(s.violations().size(), 2u);
  EXPECT_EQ(s.violations()[1].field, "c");
  EXPECT_EQ(s.ToString(),
            "INVALID_ARGUMENT: bad config\n  a.b: must be positive\n  c: unknown dtype 'int5'");
}

TEST(StatusTest, AssignOrReturnPropagates) {
  EXPECT_EQ(*Quarter(8), 2);
  StatusOr<int> r = Quarter(6);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "odd: 3");
  EXPECT_TRUE(CheckEven(4).ok());
  EXPECT_EQ(CheckEven(5).code(), StatusCode::kInvalidArgument);
}

TEST(StatusTest, StatusOrFromOkStatusIsInternalError) {
  StatusOr<int> r = OkStatus();
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
}

TEST(StatusTest, MoveOnlyValues) {
  StatusOr<std::unique_ptr<int>> r = std::make_unique<int>(7);
  ASSERT_TRUE(r.ok());
  std::unique_ptr<int> p = std::move(r).value();
  EXPECT_EQ(*p, 7);
}

TEST(StatusTest, PrependAddsContextOnlyToErrors) {
  Status ok;
  ok.Prepend("ctx: ");
  EXPECT_EQ(ok.message(), "");
  Status bad = NotFoundError("missing tensor");
  bad.Prepend("model.safetensors: ");
  EXPECT_EQ(bad.message(), "model.safetensors: missing tensor");
}

}  // namespace
}  // namespace quantd
