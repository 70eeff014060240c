#include "server/common/repeated_flags.h"

#include "gtest/gtest.h"
#include "worker/common/status.h"

namespace quantd::server {
namespace {

TEST(RepeatedFlagsTest, CollectsEveryOccurrenceVerbatim) {
  std::vector<std::string> args = {"quantd",
                                   "--worker-arg=--allowed-roots=/a,/b",
                                   "--listen=127.0.0.1:0",
                                   "--worker_arg=--threads=4",
                                   "--worker-arg",
                                   "--tls-ca=/etc/ca.pem",
                                   "--worker-arg=",
                                   "--worker-args=not-this-flag",
                                   "--",
                                   "--worker-arg=after-double-dash"};
  auto values = TakeRepeatedFlag(args, "worker-arg");
  ASSERT_TRUE(values.ok()) << values.status();
  EXPECT_EQ(*values, (std::vector<std::string>{"--allowed-roots=/a,/b", "--threads=4",
                                               "--tls-ca=/etc/ca.pem", ""}));
  EXPECT_EQ(args, (std::vector<std::string>{"quantd", "--listen=127.0.0.1:0",
                                            "--worker-args=not-this-flag", "--",
                                            "--worker-arg=after-double-dash"}));
}

TEST(RepeatedFlagsTest, AbsentFlagLeavesArgsAlone) {
  std::vector<std::string> args = {"quantd", "--local-workers=1"};
  auto values = TakeRepeatedFlag(args, "local-worker-env");
  ASSERT_TRUE(values.ok());
  EXPECT_TRUE(values->empty());
  EXPECT_EQ(args, (std::vector<std::string>{"quantd", "--local-workers=1"}));
}

TEST(RepeatedFlagsTest, MissingValueIsAnError) {
  std::vector<std::string> args = {"quantd", "--local-worker-env"};
  auto values = TakeRepeatedFlag(args, "local-worker-env");
  EXPECT_EQ(values.status().code(), quantd::StatusCode::kInvalidArgument);
  EXPECT_NE(values.status().message().find("--local-worker-env needs a value"), std::string::npos);
}

}  // namespace
}  // namespace quantd::server
