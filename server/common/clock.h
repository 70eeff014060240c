// Time as the server sees it. Leases, heartbeats, the lease reaper and job
// timestamps all read time through a Clock, so tests can use FakeClock and
// move time forward instead of sleeping.
#ifndef QUANTD_SERVER_COMMON_CLOCK_H_
#define QUANTD_SERVER_COMMON_CLOCK_H_

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace quantd::server {

class Clock {
 public:
  virtual ~Clock() = default;

  // The current time, truncated to whole microseconds: every timestamp the
  // server stores round-trips exactly through the job store's integer
  // microsecond columns.
  virtual absl::Time Now() = 0;

  // Blocks until Now() >= deadline or `interrupt` is notified. Returns true
  // when the deadline was reached, false when interrupted.
  virtual bool SleepUntil(absl::Time deadline, absl::Notification& interrupt) = 0;

  // The process-wide wall clock.
  static Clock* Real();
};

// Wall time (absl::Now()).
class RealClock : public Clock {
 public:
  absl::Time Now() override;
  bool SleepUntil(absl::Time deadline, absl::Notification& interrupt) override;
};

// A clock that only moves when a test says so. Sleepers wake when Advance()
// or Set() reaches their deadline.
class FakeClock : public Clock {
 public:
  explicit FakeClock(absl::Time start = absl::FromUnixSeconds(1700000000));

  absl::Time Now() override;
  bool SleepUntil(absl::Time deadline, absl::Notification& interrupt) override;

  void Advance(absl::Duration d);
  void Set(absl::Time t);

 private:
  absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
};

// Truncates to whole microseconds (the store's resolution).
absl::Time TruncateToMicros(absl::Time t);

}  // namespace quantd::server

#endif  // QUANTD_SERVER_COMMON_CLOCK_H_
