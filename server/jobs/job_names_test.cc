#include "server/jobs/job_names.h"

#include <set>

#include "gtest/gtest.h"
#include "server/common/errors.h"
#include "worker/common/status.h"

namespace quantd::server {
namespace {

TEST(JobIdGeneratorTest, IdsAre26CrockfordCharactersStartingWithTheTime) {
  JobIdGenerator ids;
  // 2023-11-14T22:13:20Z = 1700000000000 ms = 0x18BCFE56800.
  std::string id = ids.NewId(absl::FromUnixMillis(1700000000000));
  ASSERT_EQ(id.size(), 26u);
  // 26 digits hold 130 bits; the 48 time bits sit on top of 80 random
  // bits, so the first 10 digits are exactly the milliseconds in base32
  // (computed with Python: 1700000000000 -> "01hf7yat00").
  EXPECT_EQ(id.substr(0, 10), "01hf7yat00");
  for (char c : id) {
    EXPECT_NE(std::string("0123456789abcdefghjkmnpqrstvwxyz").find(c), std::string::npos) << c;
  }
}

TEST(JobIdGeneratorTest, StrictlyIncreasingWithinAMillisecondAndWhenTimeGoesBack) {
  JobIdGenerator ids;
  const absl::Time t = absl::FromUnixMillis(1700000000000);
  std::string previous = ids.NewId(t);
  for (int i = 0; i < 1000; ++i) {
    std::string next = ids.NewId(i % 2 == 0 ? t : t - absl::Seconds(5));
    EXPECT_LT(previous, next);
    previous = next;
  }
  std::string later = ids.NewId(t + absl::Milliseconds(1));
  EXPECT_LT(previous, later);
}

TEST(JobIdGeneratorTest, TwoGeneratorsDoNotCollide) {
  JobIdGenerator a, b;
  std::set<std::string> seen;
  const absl::Time t = absl::FromUnixMillis(1700000000000);
  for (int i = 0; i < 500; ++i) {
    EXPECT_TRUE(seen.insert(a.NewId(t)).second);
    EXPECT_TRUE(seen.insert(b.NewId(t)).second);
  }
}

TEST(CheckJobNameTest, AcceptsJobNamesOnly) {
  EXPECT_TRUE(CheckJobName("jobs/01hf7zjph0abcdefghjkmnpqrs", "name").ok());
  EXPECT_TRUE(CheckJobName("jobs/a-1", "name").ok());
  for (const char* bad : {"", "jobs/", "job/abc", "jobs/ABC", "jobs/a b", "jobs/a/b", "jobs/../x",
                          "projects/p/jobs/a"}) {
    quantd::Status s = CheckJobName(bad, "lease.job");
    EXPECT_EQ(s.code(), quantd::StatusCode::kInvalidArgument) << bad;
    ASSERT_EQ(s.violations().size(), 1u) << bad;
    EXPECT_EQ(s.violations()[0].field, "lease.job");
  }
  EXPECT_FALSE(CheckJobName("jobs/" + std::string(65, 'a'), "name").ok());
}

}  // namespace
}  // namespace quantd::server
