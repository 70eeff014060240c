// LocalWorkerSupervisor: runs `quantd --local-workers N`'s worker processes.
// It starts N copies of the worker binary (fork + exec, each in its own
// process group and killed by the kernel if quantd dies), restarts one that
// exits or crashes after a backoff that doubles up to a maximum, and on
// Stop() sends SIGTERM, waits a grace period, then SIGKILLs what is left.
#ifndef QUANTD_SERVER_SUPERVISOR_LOCAL_WORKER_SUPERVISOR_H_
#define QUANTD_SERVER_SUPERVISOR_LOCAL_WORKER_SUPERVISOR_H_

#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "worker/common/status.h"

namespace quantd::server {

struct LocalWorkerOptions {
  // Path of the worker executable.
  std::string binary;
  int count = 0;
  // Arguments (after argv[0]) of worker `index` (0-based).
  std::function<std::vector<std::string>(int index)> args;
  // Extra "NAME=value" environment entries on top of quantd's own.
  std::vector<std::string> extra_env;
  // Delay before restarting a worker that exited: starts here, doubles per
  // consecutive failure, at most max_backoff; reset after a run that lasted
  // healthy_after.
  absl::Duration initial_backoff = absl::Seconds(1);
  absl::Duration max_backoff = absl::Seconds(30);
  absl::Duration healthy_after = absl::Seconds(60);
  // How long Stop() waits after SIGTERM before SIGKILL.
  absl::Duration stop_grace = absl::Seconds(10);
};

class LocalWorkerSupervisor {
 public:
  explicit LocalWorkerSupervisor(LocalWorkerOptions options);
  ~LocalWorkerSupervisor();  // Stop()

  // Starts the workers. FAILED_PRECONDITION when the binary is not an
  // executable file (say which, and how to point quantd at one).
  quantd::Status Start();

  // Terminates every worker and stops restarting them. Idempotent.
  void Stop();

  // The current process id of each worker (0 while one is between runs).
  std::vector<pid_t> pids();
  // How many worker processes were started in total (restarts included).
  int starts();

  // Waits (real time) until at least `n` worker processes were started.
  bool AwaitStarts(int n, absl::Duration timeout);

 private:
  void Supervise(int index);
  // Forks and execs worker `index`; returns its pid or an error.
  quantd::StatusOr<pid_t> Spawn(int index);

  const LocalWorkerOptions options_;
  absl::Notification stopping_;
  std::vector<std::thread> threads_;

  absl::Mutex mu_;
  std::vector<pid_t> pids_ ABSL_GUARDED_BY(mu_);
  int starts_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace quantd::server

#endif  // QUANTD_SERVER_SUPERVISOR_LOCAL_WORKER_SUPERVISOR_H_
