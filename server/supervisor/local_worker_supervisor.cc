#include "server/supervisor/local_worker_supervisor.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/common/errors.h"
#include "server/common/json_log.h"
#include "worker/common/status.h"

extern char** environ;

namespace quantd::server {
namespace {

std::string DescribeExit(int wait_status) {
  if (WIFEXITED(wait_status)) return absl::StrCat("exited with code ", WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status)) {
    return absl::StrCat("killed by signal ", WTERMSIG(wait_status), " (",
                        strsignal(WTERMSIG(wait_status)), ")");
  }
  return absl::StrCat("ended with wait status ", wait_status);
}

// argv/envp arrays prepared before fork: the child of a multi-threaded
// process may only make async-signal-safe calls until exec.
struct ExecArgs {
  std::vector<std::string> storage;
  std::vector<char*> argv;
  std::vector<std::string> env_storage;
  std::vector<char*> envp;
};

}  // namespace

LocalWorkerSupervisor::LocalWorkerSupervisor(LocalWorkerOptions options)
    : options_(std::move(options)) {
  absl::MutexLock lock(&mu_);
  pids_.assign(std::max(options_.count, 0), 0);
}

LocalWorkerSupervisor::~LocalWorkerSupervisor() { Stop(); }

quantd::Status LocalWorkerSupervisor::Start() {
  struct stat st;
  if (stat(options_.binary.c_str(), &st) != 0 || !S_ISREG(st.st_mode) ||
      access(options_.binary.c_str(), X_OK) != 0) {
    return MakeError(quantd::StatusCode::kFailedPrecondition, "WORKER_BINARY_NOT_FOUND",
                     absl::StrCat("the worker binary \"", options_.binary,
                                  "\" is not an executable file; build //worker:quantd-worker or "
                                  "pass --worker-binary (or set QUANTD_WORKER_BINARY)"));
  }
  for (int i = 0; i < options_.count; ++i) {
    threads_.emplace_back([this, i] { Supervise(i); });
  }
  return quantd::OkStatus();
}

quantd::StatusOr<pid_t> LocalWorkerSupervisor::Spawn(int index) {
  ExecArgs exec;
  exec.storage.push_back(options_.binary);
  for (std::string& arg : options_.args(index)) exec.storage.push_back(std::move(arg));
  for (std::string& s : exec.storage) exec.argv.push_back(s.data());
  exec.argv.push_back(nullptr);
  for (char** e = environ; *e != nullptr; ++e) exec.env_storage.emplace_back(*e);
  for (const std::string& e : options_.extra_env) exec.env_storage.push_back(e);
  for (std::string& s : exec.env_storage) exec.envp.push_back(s.data());
  exec.envp.push_back(nullptr);

  // The child reports a failed exec through this pipe; a successful exec
  // closes it (O_CLOEXEC) and the parent reads EOF.
  int report[2];
  if (pipe2(report, O_CLOEXEC) != 0) {
    return quantd::InternalError(absl::StrCat("pipe: ", strerror(errno)));
  }
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    int err = errno;
    close(report[0]);
    close(report[1]);
    return quantd::ResourceExhaustedError(absl::StrCat("fork: ", strerror(err)));
  }
  if (pid == 0) {
    // Child. Die with quantd: the kernel sends the signal when the forking
    // thread ends, and this supervising thread outlives its child unless
    // quantd itself dies. Then leave quantd's process group, so a
    // terminal's Ctrl-C reaches only quantd, which stops the workers itself.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    setpgid(0, 0);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    signal(SIGPIPE, SIG_DFL);
    close(report[0]);
    execve(exec.argv[0], exec.argv.data(), exec.envp.data());
    int err = errno;
    ssize_t ignored = write(report[1], &err, sizeof(err));
    (void)ignored;
    _exit(127);
  }
  close(report[1]);
  int child_errno = 0;
  ssize_t n;
  do {
    n = read(report[0], &child_errno, sizeof(child_errno));
  } while (n < 0 && errno == EINTR);
  close(report[0]);
  if (n == sizeof(child_errno)) {
    waitpid(pid, nullptr, 0);
    return quantd::FailedPreconditionError(
        absl::StrCat("exec ", options_.binary, ": ", strerror(child_errno)));
  }
  return pid;
}

void LocalWorkerSupervisor::Supervise(int index) {
  absl::Duration backoff = options_.initial_backoff;
  while (!stopping_.HasBeenNotified()) {
    quantd::StatusOr<pid_t> pid = quantd::UnknownError("not started");
    {
      // Spawn under the lock so Stop() never misses a worker that is being
      // started: it either sees the pid or we see `stopped_`.
      absl::MutexLock lock(&mu_);
      if (stopped_) return;
      pid = Spawn(index);
      if (pid.ok()) {
        pids_[index] = *pid;
        ++starts_;
      }
    }
    const absl::Time started = absl::Now();
    if (!pid.ok()) {
      Log(LogLevel::kError, "could not start local worker",
          {{"worker_index", index}, {"error", pid.status().ToString()}});
    } else {
      Log(LogLevel::kInfo, "local worker started",
          {{"worker_index", index}, {"pid", *pid}, {"binary", options_.binary}});
      int wait_status = 0;
      while (waitpid(*pid, &wait_status, 0) < 0 && errno == EINTR) {
      }
      {
        absl::MutexLock lock(&mu_);
        pids_[index] = 0;
      }
      if (stopping_.HasBeenNotified()) return;
      Log(LogLevel::kWarning, "local worker ended; restarting",
          {{"worker_index", index},
           {"pid", *pid},
           {"exit", DescribeExit(wait_status)},
           {"backoff", absl::FormatDuration(backoff)}});
    }
    if (absl::Now() - started >= options_.healthy_after) backoff = options_.initial_backoff;
    if (stopping_.WaitForNotificationWithTimeout(backoff)) return;
    backoff = std::min(backoff * 2, options_.max_backoff);
  }
}

void LocalWorkerSupervisor::Stop() {
  std::vector<pid_t> running;
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return;
    stopped_ = true;
    if (!stopping_.HasBeenNotified()) stopping_.Notify();
    for (pid_t pid : pids_) {
      if (pid > 0) {
        kill(pid, SIGTERM);
        running.push_back(pid);
      }
    }
  }
  // The supervising threads reap their children; wait for that, then kill
  // whatever ignored SIGTERM.
  auto all_exited = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return std::all_of(pids_.begin(), pids_.end(), [](pid_t p) { return p == 0; });
  };
  {
    absl::MutexLock lock(&mu_);
    if (!mu_.AwaitWithTimeout(absl::Condition(&all_exited), options_.stop_grace)) {
      for (pid_t pid : pids_) {
        if (pid > 0) {
          Log(LogLevel::kWarning, "local worker ignored SIGTERM; killing it", {{"pid", pid}});
          kill(pid, SIGKILL);
        }
      }
    }
  }
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
  if (!running.empty()) Log(LogLevel::kInfo, "local workers stopped", {{"count", running.size()}});
}

std::vector<pid_t> LocalWorkerSupervisor::pids() {
  absl::MutexLock lock(&mu_);
  return pids_;
}

int LocalWorkerSupervisor::starts() {
  absl::MutexLock lock(&mu_);
  return starts_;
}

bool LocalWorkerSupervisor::AwaitStarts(int n, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto reached = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return starts_ >= n; };
  return mu_.AwaitWithTimeout(absl::Condition(&reached), timeout);
}

}  // namespace quantd::server
