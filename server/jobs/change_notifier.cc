#include "server/jobs/change_notifier.h"

namespace quantd::server {

uint64_t ChangeNotifier::QueueGeneration() {
  absl::MutexLock lock(&mu_);
  return queue_generation_;
}

void ChangeNotifier::NotifyQueue() {
  absl::MutexLock lock(&mu_);
  ++queue_generation_;
}

bool ChangeNotifier::WaitForQueueChange(uint64_t seen, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto changed = [this, seen]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return shutdown_ || queue_generation_ != seen;
  };
  mu_.AwaitWithTimeout(absl::Condition(&changed), timeout);
  return queue_generation_ != seen;
}

ChangeNotifier::Subscription::Subscription(ChangeNotifier* notifier, absl::string_view job)
    : notifier_(notifier), job_(job) {
  absl::MutexLock lock(&notifier_->mu_);
  ++notifier_->jobs_[job_].subscribers;
}

ChangeNotifier::Subscription::~Subscription() {
  absl::MutexLock lock(&notifier_->mu_);
  auto it = notifier_->jobs_.find(job_);
  if (--it->second.subscribers == 0) notifier_->jobs_.erase(it);
}

uint64_t ChangeNotifier::Subscription::Generation() {
  absl::MutexLock lock(&notifier_->mu_);
  return notifier_->jobs_[job_].generation;
}

bool ChangeNotifier::Subscription::WaitForChange(uint64_t seen, absl::Duration timeout) {
  ChangeNotifier* n = notifier_;
  absl::MutexLock lock(&n->mu_);
  const Watched& watched = n->jobs_[job_];  // exists while this subscription lives
  auto changed = [n, &watched, seen]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(n->mu_) {
    return n->shutdown_ || watched.generation != seen;
  };
  n->mu_.AwaitWithTimeout(absl::Condition(&changed), timeout);
  return watched.generation != seen;
}

void ChangeNotifier::NotifyJob(absl::string_view job) {
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(job);
  if (it != jobs_.end()) ++it->second.generation;
}

void ChangeNotifier::Shutdown() {
  absl::MutexLock lock(&mu_);
  shutdown_ = true;
}

bool ChangeNotifier::IsShutdown() {
  absl::MutexLock lock(&mu_);
  return shutdown_;
}

}  // namespace quantd::server
