// A point on the steady clock that long loops over untrusted input check, so
// that work a request started stops when its budget is spent.
#ifndef QUANTD_WORKER_COMMON_DEADLINE_H_
#define QUANTD_WORKER_COMMON_DEADLINE_H_

#include <chrono>
#include <cstdint>

namespace quantd {

class Deadline {
 public:
  using Clock = std::chrono::steady_clock;

  // Never expires.
  static Deadline Never() { return Deadline(Clock::time_point::max(), 0); }
  // `budget` from now.
  static Deadline After(std::chrono::milliseconds budget) {
    return Deadline(Clock::now() + budget, budget.count());
  }

  bool Expired() const {
    return at_ != Clock::time_point::max() && Clock::now() >= at_;
  }
  // The budget it was made with, for messages (0 for Never()).
  int64_t budget_ms() const { return budget_ms_; }

 private:
  Deadline(Clock::time_point at, int64_t budget_ms) : at_(at), budget_ms_(budget_ms) {}
  Clock::time_point at_;
  int64_t budget_ms_;
};

}  // namespace quantd

#endif  // QUANTD_WORKER_COMMON_DEADLINE_H_
