// In-process wake-ups for waiters that would otherwise poll the store: a
// worker long-polling LeaseJob waits for "the queue changed", a WatchJob
// stream waits for "this job has new events". Notifications are only a
// hint: waiters always re-read the store, and they also wake up on a
// timeout, because another frontend sharing the database does not notify
// this process.
#ifndef QUANTD_SERVER_JOBS_CHANGE_NOTIFIER_H_
#define QUANTD_SERVER_JOBS_CHANGE_NOTIFIER_H_

#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/node_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace quantd::server {

class ChangeNotifier {
 public:
  // Queue: jobs were created or re-queued.
  uint64_t QueueGeneration();
  void NotifyQueue();
  // Waits until the generation differs from `seen`, `timeout` passes, or
  // Shutdown(). Returns true when it changed.
  bool WaitForQueueChange(uint64_t seen, absl::Duration timeout);

  // Job events. Only jobs somebody watches are tracked: a Subscription
  // registers interest for its lifetime.
  class Subscription {
   public:
    Subscription(ChangeNotifier* notifier, absl::string_view job);
    ~Subscription();
    Subscription(const Subscription&) = delete;
    Subscription& operator=(const Subscription&) = delete;

    uint64_t Generation();
    bool WaitForChange(uint64_t seen, absl::Duration timeout);

   private:
    ChangeNotifier* notifier_;
    std::string job_;
  };
  void NotifyJob(absl::string_view job);

  // Wakes every waiter now and makes later waits return at once.
  void Shutdown();
  bool IsShutdown();

 private:
  struct Watched {
    uint64_t generation = 0;
    int subscribers = 0;
  };

  absl::Mutex mu_;
  uint64_t queue_generation_ ABSL_GUARDED_BY(mu_) = 0;
  // node_hash_map: waiters hold references to entries across rehashes.
  absl::node_hash_map<std::string, Watched> jobs_ ABSL_GUARDED_BY(mu_);
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace quantd::server

#endif  // QUANTD_SERVER_JOBS_CHANGE_NOTIFIER_H_
