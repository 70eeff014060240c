// LeaseReaper: the background loop that ends expired leases (see
// LeaseService::ReapExpiredLeases) every `interval` of clock time, about a
// quarter of the lease duration. It sleeps on the injected Clock, so with a
// FakeClock a test moves time forward and then awaits the pass with
// AwaitPass() instead of sleeping.
#ifndef QUANTD_SERVER_JOBS_LEASE_REAPER_H_
#define QUANTD_SERVER_JOBS_LEASE_REAPER_H_

#include <cstdint>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "server/common/clock.h"
#include "server/jobs/lease_service.h"

namespace quantd::server {

class LeaseReaper {
 public:
  LeaseReaper(LeaseService* leases, Clock* clock, absl::Duration interval);
  ~LeaseReaper();  // stops the loop

  // Starts the loop; the first pass runs at once.
  void Start();
  // Stops the loop and waits for it. Idempotent.
  void Stop();

  // Waits (up to `timeout` of real time) until a pass that started at clock
  // time >= `at` has finished. True when one has.
  bool AwaitPass(absl::Time at, absl::Duration timeout);

  // Completed passes, and jobs changed by all passes so far.
  int64_t passes();
  int64_t reaped();

 private:
  void Loop();

  LeaseService* leases_;
  Clock* clock_;
  const absl::Duration interval_;
  absl::Notification stop_;
  std::unique_ptr<std::thread> thread_;

  absl::Mutex mu_;
  int64_t passes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t reaped_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time last_pass_start_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

}  // namespace quantd::server

#endif  // QUANTD_SERVER_JOBS_LEASE_REAPER_H_
