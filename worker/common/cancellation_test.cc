#include "worker/common/cancellation.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace quantd {
namespace {

TEST(CancellationTest, NoScopeNeverStops) { EXPECT_FALSE(StopRequested()); }

TEST(CancellationTest, ScopesNestAndRestore) {
  bool outer = false, inner = false;
  {
    CancellationScope a([&] { return outer; });
    EXPECT_FALSE(StopRequested());
    {
      CancellationScope b([&] { return inner; });
      EXPECT_FALSE(StopRequested());
      outer = true;  // an enclosing scope's stop reaches the inner work
      EXPECT_TRUE(StopRequested());
      outer = false;
      inner = true;
      EXPECT_TRUE(StopRequested());
    }
    EXPECT_FALSE(StopRequested()) << "the inner scope is gone";
    outer = true;
    EXPECT_TRUE(StopRequested());
  }
  EXPECT_FALSE(StopRequested());
}

TEST(CancellationTest, ScopeBelongsToItsThread) {
  CancellationScope stop([] { return true; });
  EXPECT_TRUE(StopRequested());
  std::atomic<bool> other{true};
  std::thread t([&] { other = StopRequested(); });
  t.join();
  EXPECT_FALSE(other.load());
}

TEST(CancellationTest, PollerChecksEveryNthCall) {
  int calls = 0;
  CancellationScope scope([&] {
    ++calls;
    return calls >= 2;
  });
  CancellationPoller poller(4);
  int due_at = 0;
  for (int i = 1; i <= 20 && due_at == 0; ++i)
    if (poller.Due()) due_at = i;
  EXPECT_EQ(due_at, 8);  // checked at calls 4 (false) and 8 (true)
  EXPECT_EQ(calls, 2);
}

TEST(CancellationTest, CancelledStatusNamesTheLoop) {
  const Status s = CancelledStatus("tokenizing the evaluation data");
  EXPECT_EQ(s.code(), StatusCode::kCancelled);
  EXPECT_EQ(s.reason(), "CANCELLED");
  EXPECT_EQ(s.message(), "cancelled while tokenizing the evaluation data");
}

}  // namespace
}  // namespace quantd
