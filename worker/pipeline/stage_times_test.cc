#include "worker/pipeline/stage_times.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace quantd::pipeline {
namespace {

void SleepMs(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

TEST(StageTimesTest, ChargesEachIntervalToItsStageInOrderOfFirstUse) {
  StageTimes t;
  SleepMs(20);
  t.Mark("load");
  SleepMs(40);
  t.Mark("forward");
  SleepMs(20);
  t.Mark("load");
  // Sleeps last at least as long as asked; the ceiling is only a sanity bound.
  EXPECT_GE(t.Seconds("load"), 0.040);
  EXPECT_GE(t.Seconds("forward"), 0.040);
  EXPECT_LT(t.Seconds("forward"), 30.0);
  EXPECT_EQ(t.Seconds("never"), 0.0);
  const std::string r = t.Render();
  EXPECT_EQ(r.rfind("load ", 0), 0u) << r;
  EXPECT_NE(r.find(", forward "), std::string::npos) << r;
}

TEST(StageTimesTest, AddedTimeIsNotCountedAgainByTheNextMark) {
  StageTimes t;
  SleepMs(30);
  t.Add("inner", 0.025);
  t.Mark("outer");
  EXPECT_DOUBLE_EQ(t.Seconds("inner"), 0.025);
  // outer = elapsed (>= 0.030) - 0.025, never negative.
  EXPECT_GE(t.Seconds("outer"), 0.0);
  EXPECT_GE(t.Seconds("outer") + t.Seconds("inner"), 0.030);
  // A charge larger than the interval leaves the outer stage at zero.
  t.Add("inner", 10.0);
  t.Mark("outer2");
  EXPECT_EQ(t.Seconds("outer2"), 0.0);
}

}  // namespace
}  // namespace quantd::pipeline
