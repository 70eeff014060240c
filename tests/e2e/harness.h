// End-to-end test harness: starts real quantd / quantd-worker processes on
// loopback, runs quantctl, and talks to quantd with the generated stubs.
//
// Binaries and bundled data are found in the test's runfiles (the test's
// working directory); every process a harness starts is killed when it is
// destroyed, so a failing test never leaks servers.
#ifndef QUANTD_TESTS_E2E_HARNESS_H_
#define QUANTD_TESTS_E2E_HARNESS_H_

#include <grpcpp/grpcpp.h>
#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "quantd/v1/quantization_service.grpc.pb.h"

namespace quantd::e2e {

// Absolute path of a runfile, e.g. Runfile("models/stories260K").
std::string Runfile(const std::string& relative);

// A child process with its stdout+stderr captured to a log file.
class Process {
 public:
  // Starts `argv[0]` with `argv`; `env` entries ("K=V") are added.
  static std::unique_ptr<Process> Start(const std::vector<std::string>& argv,
                                        const std::string& log_path,
                                        const std::vector<std::string>& env = {});
  ~Process();  // SIGKILL if still running

  pid_t pid() const { return pid_; }
  bool Running();
  // Sends `sig`, waits up to `timeout` for exit; returns the wait status or -1.
  // The default is a ceiling for a hang, not a measure of how fast it stops.
  int Stop(int sig, std::chrono::milliseconds timeout = std::chrono::seconds(120));
  std::string Log() const;

 private:
  pid_t pid_ = -1;
  std::string log_path_;
  bool reaped_ = false;
  int status_ = 0;
};

struct CommandResult {
  int exit_code = -1;
  std::string stdout_text;
  std::string stderr_text;
};

// How long the waits below allow by default: a ceiling for a slow, loaded
// machine, not a budget (they return as soon as the condition holds).
inline constexpr std::chrono::seconds kWaitCeiling{1800};

// Runs a command to completion (stdin closed), with a time limit.
CommandResult RunCommand(const std::vector<std::string>& argv,
                         std::chrono::seconds timeout = kWaitCeiling);

// The URI roots tests get by default: the runfiles directory, the real
// directories its bundled files link into (the source tree), and TEST_TMPDIR.
std::vector<std::string> DefaultRoots();
// `roots` as a worker's --allowed-roots flag.
std::string AllowedRootsFlag(const std::vector<std::string>& roots);

struct QuantdOptions {
  std::string data_dir;        // required
  std::string store;           // default sqlite:///<data_dir>/quantd.db
  int local_workers = 0;
  std::string lease_duration = "60s";
  // --allowed-uri-roots (local workers get them too); unset: DefaultRoots(),
  // empty: none (jobs may then read no input).
  std::optional<std::vector<std::string>> allowed_uri_roots;
  std::vector<std::string> extra_flags;
};

// A quantd frontend on 127.0.0.1:<free port>.
class Quantd {
 public:
  static std::unique_ptr<Quantd> Start(const QuantdOptions& options);
  const std::string& address() const { return address_; }
  Process& process() { return *process_; }
  std::unique_ptr<quantd::v1::QuantizationService::Stub> NewClient() const;
  // Stops gracefully (SIGTERM).
  void Stop();
  std::string Log() const { return process_->Log(); }

 private:
  std::unique_ptr<Process> process_;
  std::string address_;
};

// Starts `quantd-worker --server <address> --data-dir <data_dir>` plus `extra`,
// with --allowed-roots set to DefaultRoots() unless `extra` sets it.
std::unique_ptr<Process> StartWorker(const std::string& address, const std::string& data_dir,
                                     const std::string& worker_id,
                                     const std::vector<std::string>& extra = {});

// Runs quantctl against `address` with `args`.
CommandResult Quantctl(const std::string& address, const std::vector<std::string>& args,
                       std::chrono::seconds timeout = kWaitCeiling);

// Polls GetJob until the job is in a terminal state. Gives up (returning the
// job as last seen) only when it has not moved (state, attempt, stage, block,
// percent) for `stall`: a slow or loaded machine only makes it take longer.
quantd::v1::Job WaitForJob(quantd::v1::QuantizationService::Stub& api, const std::string& name,
                           std::chrono::seconds stall = std::chrono::seconds(300));

// The same wait with the caller's GetJob (`get` fills the job and returns
// whether the call succeeded), e.g. one that carries a bearer token.
quantd::v1::Job WaitWhileJobMoves(const std::string& name,
                                  const std::function<bool(quantd::v1::Job*)>& get,
                                  std::chrono::seconds stall);

// Calls `done` every `poll` until it returns true (true) or `ceiling`
// passes (false). The ceiling only catches a hang; make it generous.
bool WaitUntil(const std::function<bool()>& done,
               std::chrono::seconds ceiling = std::chrono::seconds(600),
               std::chrono::milliseconds poll = std::chrono::milliseconds(20));

bool IsTerminal(quantd::v1::JobState s);

// GetJob, expecting success.
quantd::v1::Job GetJob(quantd::v1::QuantizationService::Stub& api, const std::string& name);

// Every event of a job so far (WatchJob replays them; ends when the job has).
std::vector<quantd::v1::JobEvent> Events(quantd::v1::QuantizationService::Stub& api,
                                         const std::string& name);

// A fresh directory under TEST_TMPDIR.
std::string TempDir(const std::string& name);

// A file's whole content ("" when it cannot be read).
std::string ReadFile(const std::string& path);

// The last non-empty line of `text` (quantctl -o json --wait prints the
// events, then the final job).
std::string LastLine(const std::string& text);

}  // namespace quantd::e2e

#endif  // QUANTD_TESTS_E2E_HARNESS_H_
