// A quantd binary running as a child process, for tests that need real
// processes (signals, kill -9, restarts on the same port). It finds the
// binary in the test's runfiles, waits for --port-file, and kills the
// process when destroyed.
#ifndef QUANTD_SERVER_TESTING_QUANTD_PROCESS_H_
#define QUANTD_SERVER_TESTING_QUANTD_PROCESS_H_

#include <grpcpp/channel.h>
#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "worker/common/status.h"

namespace quantd::server::testing {

struct QuantdProcessOptions {
  std::string data_dir;
  // "127.0.0.1:0" picks a free port; a fixed port lets a restarted process
  // come back at the same address.
  std::string listen = "127.0.0.1:0";
  std::vector<std::string> extra_flags;
  // "NAME=value" entries added to the environment.
  std::vector<std::string> extra_env;
  // When set, quantd's stderr (its JSON log) goes to this file instead of
  // the test's.
  std::string log_file;
};

class QuantdProcess {
 public:
  // Starts //server:quantd (a data dependency of the test) and waits until
  // it serves.
  static quantd::StatusOr<std::unique_ptr<QuantdProcess>> Start(
      const QuantdProcessOptions& options);
  ~QuantdProcess();  // SIGKILL if still running

  // SIGTERM and wait: the exit status (-1 after 30 s).
  int Terminate();
  // Sends `signal` without waiting.
  void Signal(int signal);
  // Waits up to `timeout` for the process to exit: its exit status (128 +
  // signal for a signal), or -1 if it is still running.
  int Wait(absl::Duration timeout);
  // SIGKILL and reap, as a crash would.
  void Kill();

  const std::string& address() const { return address_; }
  int metrics_port() const { return metrics_port_; }
  pid_t pid() const { return pid_; }
  std::shared_ptr<grpc::Channel> NewChannel() const;

 private:
  QuantdProcess() = default;
  pid_t pid_ = 0;
  std::string address_;
  int metrics_port_ = 0;
};

// Path of a runfile of the "quantd" workspace, e.g. "server/quantd".
std::string Runfile(const std::string& path);

// A port on 127.0.0.1 that was free a moment ago.
int PickFreePort();

}  // namespace quantd::server::testing

#endif  // QUANTD_SERVER_TESTING_QUANTD_PROCESS_H_
