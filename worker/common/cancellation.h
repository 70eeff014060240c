// Cooperative cancellation of the work a thread is doing.
//
// Whoever runs a job (the worker's executor, the standalone CLI) installs a
// CancellationScope around it with the check it has: a cancel from the
// frontend, or a lease that is lost. Every long loop of the engine, however
// deep (planning over module names, dataset lines, tokenizing, a block's
// sub-batches, evaluation batches, GPTQ's column blocks, AWQ's grid,
// export's tensors), calls StopRequested() once an iteration and returns
// CancelledStatus() when it is true, so a job stops within one iteration
// instead of at the next block boundary, and no API in between needs a
// callback parameter. Without a scope StopRequested() is always false.
//
// The check runs on the thread that installed the scope only (helper
// threads such as the block prefetcher do bounded work and are joined).
// It costs a thread-local read and the installed function (two atomic loads
// in the worker); a loop whose iterations take nanoseconds uses
// CancellationPoller to call it every Nth time.
#ifndef QUANTD_WORKER_COMMON_CANCELLATION_H_
#define QUANTD_WORKER_COMMON_CANCELLATION_H_

#include <cstdint>
#include <functional>
#include <string>

#include "worker/common/status.h"

namespace quantd {

class CancellationScope {
 public:
  // `requested` is called from this thread while the scope lives; true
  // means stop. Scopes nest: an inner scope's work stops when any
  // enclosing scope's check is true too.
  explicit CancellationScope(std::function<bool()> requested);
  ~CancellationScope();
  CancellationScope(const CancellationScope&) = delete;
  CancellationScope& operator=(const CancellationScope&) = delete;

 private:
  friend bool StopRequested();
  std::function<bool()> requested_;
  CancellationScope* outer_;
};

// True when a scope on this thread asks the work to stop.
bool StopRequested();

// CANCELLED, reason CANCELLED: what a loop returns when StopRequested().
// `where` names the loop for the log, e.g. "tokenizing the evaluation data".
inline Status CancelledStatus(const std::string& where) {
  return Status(StatusCode::kCancelled, "cancelled while " + where, "CANCELLED");
}

// StopRequested() every `every`th call of Due(); for loops whose iterations
// are too short to pay for a call each.
class CancellationPoller {
 public:
  explicit CancellationPoller(uint32_t every = 1024) : every_(every == 0 ? 1 : every) {}
  bool Due() {
    if (++count_ < every_) return false;
    count_ = 0;
    return StopRequested();
  }

 private:
  uint32_t every_;
  uint32_t count_ = 0;
};

}  // namespace quantd

#endif  // QUANTD_WORKER_COMMON_CANCELLATION_H_
