#include "server/jobs/lease_reaper.h"

#include "server/common/json_log.h"
#include "worker/common/status.h"

namespace quantd::server {

LeaseReaper::LeaseReaper(LeaseService* leases, Clock* clock, absl::Duration interval)
    : leases_(leases), clock_(clock), interval_(interval) {}

LeaseReaper::~LeaseReaper() { Stop(); }

void LeaseReaper::Start() {
  if (thread_ != nullptr) return;
  thread_ = std::make_unique<std::thread>([this] { Loop(); });
}

void LeaseReaper::Stop() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  if (thread_ != nullptr && thread_->joinable()) thread_->join();
}

void LeaseReaper::Loop() {
  while (true) {
    const absl::Time start = clock_->Now();
    quantd::StatusOr<int> changed = leases_->ReapExpiredLeases();
    if (!changed.ok()) {
      // The store may be briefly unreachable (PostgreSQL failover); the next
      // pass tries again.
      Log(LogLevel::kWarning, "lease reaper pass failed", {{"error", changed.status().ToString()}});
    }
    {
      absl::MutexLock lock(&mu_);
      ++passes_;
      if (changed.ok()) reaped_ += *changed;
      last_pass_start_ = start;
    }
    if (!clock_->SleepUntil(start + interval_, stop_)) return;
  }
}

bool LeaseReaper::AwaitPass(absl::Time at, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto done = [this, at]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return last_pass_start_ >= at; };
  return mu_.AwaitWithTimeout(absl::Condition(&done), timeout);
}

int64_t LeaseReaper::passes() {
  absl::MutexLock lock(&mu_);
  return passes_;
}

int64_t LeaseReaper::reaped() {
  absl::MutexLock lock(&mu_);
  return reaped_;
}

}  // namespace quantd::server
