#include "server/jobs/change_notifier.h"

#include <thread>

#include "gtest/gtest.h"

namespace quantd::server {
namespace {

TEST(ChangeNotifierTest, QueueWaitReturnsWhenNotified) {
  ChangeNotifier notifier;
  uint64_t seen = notifier.QueueGeneration();
  std::thread notify([&] { notifier.NotifyQueue(); });
  EXPECT_TRUE(notifier.WaitForQueueChange(seen, absl::Seconds(30)));
  notify.join();
  EXPECT_EQ(notifier.QueueGeneration(), seen + 1);
  // Nothing new: times out and says so.
  EXPECT_FALSE(notifier.WaitForQueueChange(seen + 1, absl::Milliseconds(10)));
}

TEST(ChangeNotifierTest, JobNotificationsReachOnlyThatJobsSubscribers) {
  ChangeNotifier notifier;
  ChangeNotifier::Subscription a(&notifier, "jobs/a");
  ChangeNotifier::Subscription b(&notifier, "jobs/b");
  uint64_t a0 = a.Generation();
  uint64_t b0 = b.Generation();
  notifier.NotifyJob("jobs/a");
  notifier.NotifyJob("jobs/unwatched");
  EXPECT_TRUE(a.WaitForChange(a0, absl::Seconds(30)));
  EXPECT_FALSE(b.WaitForChange(b0, absl::Milliseconds(10)));
  EXPECT_EQ(a.Generation(), a0 + 1);
}

TEST(ChangeNotifierTest, ManySubscribersSurviveRehashing) {
  ChangeNotifier notifier;
  ChangeNotifier::Subscription first(&notifier, "jobs/first");
  uint64_t g = first.Generation();
  std::thread waiter([&] { EXPECT_TRUE(first.WaitForChange(g, absl::Seconds(30))); });
  std::vector<std::unique_ptr<ChangeNotifier::Subscription>> others;
  for (int i = 0; i < 1000; ++i) {
    others.push_back(
        std::make_unique<ChangeNotifier::Subscription>(&notifier, "jobs/x" + std::to_string(i)));
  }
  notifier.NotifyJob("jobs/first");
  waiter.join();
}

TEST(ChangeNotifierTest, ShutdownWakesWaitersAtOnce) {
  ChangeNotifier notifier;
  ChangeNotifier::Subscription sub(&notifier, "jobs/a");
  uint64_t g = sub.Generation();
  std::thread stop([&] { notifier.Shutdown(); });
  absl::Time start = absl::Now();
  sub.WaitForChange(g, absl::Seconds(30));
  notifier.WaitForQueueChange(notifier.QueueGeneration(), absl::Seconds(30));
  stop.join();
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  EXPECT_TRUE(notifier.IsShutdown());
}

}  // namespace
}  // namespace quantd::server
