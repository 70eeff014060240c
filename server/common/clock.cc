#include "server/common/clock.h"

namespace quantd::server {

absl::Time TruncateToMicros(absl::Time t) { return absl::FromUnixMicros(absl::ToUnixMicros(t)); }

Clock* Clock::Real() {
  static RealClock* clock = new RealClock();
  return clock;
}

absl::Time RealClock::Now() { return TruncateToMicros(absl::Now()); }

bool RealClock::SleepUntil(absl::Time deadline, absl::Notification& interrupt) {
  return !interrupt.WaitForNotificationWithDeadline(deadline);
}

FakeClock::FakeClock(absl::Time start) : now_(TruncateToMicros(start)) {}

absl::Time FakeClock::Now() {
  absl::MutexLock lock(&mu_);
  return now_;
}

bool FakeClock::SleepUntil(absl::Time deadline, absl::Notification& interrupt) {
  // The interrupt is a separate primitive, so wake up every few milliseconds
  // of real time to look at it; time itself only moves through Advance/Set.
  absl::MutexLock lock(&mu_);
  while (now_ < deadline) {
    if (interrupt.HasBeenNotified()) return false;
    auto reached = [this, deadline]()
                       ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return now_ >= deadline; };
    mu_.AwaitWithTimeout(absl::Condition(&reached), absl::Milliseconds(5));
  }
  return true;
}

void FakeClock::Advance(absl::Duration d) {
  absl::MutexLock lock(&mu_);
  now_ = TruncateToMicros(now_ + d);
}

void FakeClock::Set(absl::Time t) {
  absl::MutexLock lock(&mu_);
  now_ = TruncateToMicros(t);
}

}  // namespace quantd::server
