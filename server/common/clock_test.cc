#include "server/common/clock.h"

#include <thread>

#include "gtest/gtest.h"

namespace quantd::server {
namespace {

TEST(FakeClockTest, AdvanceMovesNowByExactlyTheDuration) {
  FakeClock clock(absl::FromUnixSeconds(1000));
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(1000));
  clock.Advance(absl::Milliseconds(1500));
  EXPECT_EQ(clock.Now(), absl::FromUnixMillis(1001500));
  clock.Set(absl::FromUnixSeconds(5));
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(5));
}

TEST(FakeClockTest, TruncatesToMicroseconds) {
  FakeClock clock(absl::FromUnixNanos(1'000'000'123'456'789));
  EXPECT_EQ(absl::ToUnixNanos(clock.Now()), 1'000'000'123'456'000);
}

TEST(FakeClockTest, SleeperWakesWhenTimeReachesDeadline) {
  FakeClock clock(absl::FromUnixSeconds(100));
  absl::Notification interrupt;
  bool reached = false;
  std::thread sleeper([&] { reached = clock.SleepUntil(absl::FromUnixSeconds(160), interrupt); });
  clock.Advance(absl::Seconds(30));
  clock.Advance(absl::Seconds(30));
  sleeper.join();
  EXPECT_TRUE(reached);
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(160));
}

TEST(FakeClockTest, InterruptEndsSleepEarly) {
  FakeClock clock(absl::FromUnixSeconds(100));
  absl::Notification interrupt;
  bool reached = true;
  std::thread sleeper([&] { reached = clock.SleepUntil(absl::FromUnixSeconds(1000), interrupt); });
  interrupt.Notify();
  sleeper.join();
  EXPECT_FALSE(reached);
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(100));
}

TEST(RealClockTest, PastDeadlineReturnsAtOnce) {
  absl::Notification interrupt;
  Clock* clock = Clock::Real();
  EXPECT_TRUE(clock->SleepUntil(clock->Now() - absl::Seconds(1), interrupt));
  interrupt.Notify();
  EXPECT_FALSE(clock->SleepUntil(clock->Now() + absl::Hours(1), interrupt));
}

}  // namespace
}  // namespace quantd::server
