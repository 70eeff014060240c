#include "server/testing/quantd_process.h"

#include <fcntl.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "worker/common/status.h"

extern char** environ;

namespace quantd::server::testing {

std::string Runfile(const std::string& path) {
  const char* root = std::getenv("TEST_SRCDIR");
  if (root == nullptr) {
    // A bench run with `bazel run`: runfiles sit next to the binary.
    static std::string self = [] {
      char buf[4096];
      ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
      return std::string(buf, n > 0 ? n : 0) + ".runfiles";
    }();
    return absl::StrCat(self, "/quantd/", path);
  }
  return absl::StrCat(root, "/quantd/", path);
}

int PickFreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

quantd::StatusOr<std::unique_ptr<QuantdProcess>> QuantdProcess::Start(
    const QuantdProcessOptions& options) {
  static int count = 0;
  const std::string port_file = absl::StrCat(options.data_dir, ".port-", getpid(), "-", ++count);
  std::unique_ptr<QuantdProcess> process(new QuantdProcess());
  std::vector<std::string> args = {Runfile("server/quantd"), "--listen=" + options.listen,
                                   "--data-dir=" + options.data_dir, "--port-file=" + port_file};
  args.insert(args.end(), options.extra_flags.begin(), options.extra_flags.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  env.insert(env.end(), options.extra_env.begin(), options.extra_env.end());
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (!options.log_file.empty()) {
    posix_spawn_file_actions_addopen(&actions, 2, options.log_file.c_str(),
                                     O_WRONLY | O_CREAT | O_APPEND, 0644);
  }
  const int spawned =
      posix_spawn(&process->pid_, argv[0], &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) return quantd::InternalError(absl::StrCat("cannot start ", argv[0]));
  for (int i = 0; i < 3000; ++i) {
    std::ifstream in(port_file);
    std::stringstream text;
    text << in.rdbuf();
    std::vector<std::string> lines = absl::StrSplit(text.str(), '\n', absl::SkipEmpty());
    if (lines.size() >= 2) {
      process->address_ = lines[0];
      process->metrics_port_ = std::atoi(lines[1].c_str());
      unlink(port_file.c_str());
      return process;
    }
    int status;
    if (waitpid(process->pid_, &status, WNOHANG) == process->pid_) {
      process->pid_ = 0;
      return quantd::InternalError("quantd exited before serving (see the test log)");
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  return quantd::DeadlineExceededError("quantd did not write its port file within 30 s");
}

QuantdProcess::~QuantdProcess() { Kill(); }

int QuantdProcess::Terminate() {
  if (pid_ <= 0) return -1;
  kill(pid_, SIGTERM);
  return Wait(absl::Seconds(30));
}

void QuantdProcess::Signal(int signal) {
  if (pid_ > 0) kill(pid_, signal);
}

int QuantdProcess::Wait(absl::Duration timeout) {
  if (pid_ <= 0) return -1;
  const absl::Time give_up = absl::Now() + timeout;
  while (true) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = 0;
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    if (absl::Now() >= give_up) return -1;
    absl::SleepFor(absl::Milliseconds(10));
  }
}

void QuantdProcess::Kill() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  pid_ = 0;
}

std::shared_ptr<grpc::Channel> QuantdProcess::NewChannel() const {
  return grpc::CreateChannel(address_, grpc::InsecureChannelCredentials());
}

}  // namespace quantd::server::testing
