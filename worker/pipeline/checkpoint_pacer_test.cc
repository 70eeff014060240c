#include "worker/pipeline/checkpoint_pacer.h"

#include <gtest/gtest.h>

namespace quantd::pipeline {
namespace {

using Clock = CheckpointPacer::Clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(CheckpointPacerTest, CheapCheckpointsAfterEveryBlock) {
  CheckpointPacer p;
  const Clock::time_point t0 = Clock::now();
  EXPECT_TRUE(p.Due(1, 32, t0)) << "the first one measures the cost";
  p.Record(t0, t0 + milliseconds(999));
  EXPECT_TRUE(p.Due(2, 32, t0 + milliseconds(1000)));
  EXPECT_EQ(p.interval_seconds(), 0);
}

TEST(CheckpointPacerTest, ACostlyOneWaitsTenTimesItsCost) {
  CheckpointPacer p;
  const Clock::time_point t0 = Clock::now();
  p.Record(t0, t0 + seconds(8));  // 8 s: the next after 80 s more work
  EXPECT_DOUBLE_EQ(p.last_seconds(), 8);
  EXPECT_DOUBLE_EQ(p.interval_seconds(), 80);
  EXPECT_FALSE(p.Due(2, 32, t0 + seconds(8 + 79)));
  EXPECT_TRUE(p.Due(2, 32, t0 + seconds(8 + 80)));
  EXPECT_TRUE(p.Due(32, 32, t0 + seconds(9))) << "the last block's always";
  // A cheaper one later resets the pace.
  p.Record(t0 + seconds(100), t0 + seconds(100) + milliseconds(500));
  EXPECT_TRUE(p.Due(5, 32, t0 + seconds(101)));
}

}  // namespace
}  // namespace quantd::pipeline
