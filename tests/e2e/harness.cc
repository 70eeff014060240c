#include "tests/e2e/harness.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "gtest/gtest.h"

namespace quantd::e2e {

namespace fs = std::filesystem;

std::string Runfile(const std::string& relative) {
  // Bazel runs tests from the main repository's runfiles directory.
  return (fs::current_path() / relative).lexically_normal().string();
}

namespace {

std::string Join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ",") + s;
  return out;
}

}  // namespace

std::string AllowedRootsFlag(const std::vector<std::string>& roots) {
  std::string joined;
  for (const auto& r : roots) joined += (joined.empty() ? "" : ",") + r;
  return "--allowed-roots=" + joined;
}

std::vector<std::string> DefaultRoots() {
  // As given: quantd resolves each root itself and accepts outputs below
  // either spelling.
  std::vector<std::string> roots;
  auto add = [&roots](const fs::path& p) {
    std::error_code ec;
    if (!fs::is_directory(p, ec)) return;
    const std::string path = p.lexically_normal().string();
    for (const auto& r : roots) {
      if (r == path) return;
    }
    roots.push_back(path.size() > 1 && path.back() == '/' ? path.substr(0, path.size() - 1) : path);
  };
  add(fs::current_path());
  if (const char* tmp = std::getenv("TEST_TMPDIR")) add(tmp);
  // Runfiles are links into the source tree; what a job reads through them
  // really lies there.
  for (const std::string rel : {"models/stories260K/config.json",
                                "tests/data/tinystories-sample.txt"}) {
    std::error_code ec;
    const std::string real = fs::canonical(Runfile(rel), ec).string();
    if (!ec && real.size() > rel.size() &&
        real.compare(real.size() - rel.size(), rel.size(), rel) == 0) {
      add(real.substr(0, real.size() - rel.size()));
    }
  }
  return roots;
}

std::string TempDir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  fs::path dir = fs::path(base ? base : "/tmp") / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::unique_ptr<Process> Process::Start(const std::vector<std::string>& argv,
                                        const std::string& log_path,
                                        const std::vector<std::string>& env) {
  auto p = std::unique_ptr<Process>(new Process());
  p->log_path_ = log_path;
  pid_t pid = fork();
  if (pid == 0) {
    int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    int devnull = open("/dev/null", O_RDONLY);
    dup2(devnull, 0);
    setpgid(0, 0);
    for (const auto& kv : env) putenv(const_cast<char*>(kv.c_str()));
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  p->pid_ = pid;
  return p;
}

Process::~Process() {
  if (pid_ > 0 && !reaped_) {
    kill(-pid_, SIGKILL);  // the process group: local workers too
    kill(pid_, SIGKILL);
    waitpid(pid_, &status_, 0);
  }
}

bool Process::Running() {
  if (reaped_) return false;
  int st = 0;
  pid_t r = waitpid(pid_, &st, WNOHANG);
  if (r == pid_) {
    reaped_ = true;
    status_ = st;
    return false;
  }
  return true;
}

int Process::Stop(int sig, std::chrono::milliseconds timeout) {
  if (!Running()) return status_;
  kill(pid_, sig);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (!Running()) return status_;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return -1;
}

std::string Process::Log() const { return ReadFile(log_path_); }

CommandResult RunCommand(const std::vector<std::string>& argv, std::chrono::seconds timeout) {
  static int counter = 0;
  const std::string base = TempDir("cmd") + "/" + std::to_string(getpid()) + "_" + std::to_string(++counter);
  const std::string out_path = base + ".out", err_path = base + ".err";
  pid_t pid = fork();
  if (pid == 0) {
    int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int devnull = open("/dev/null", O_RDONLY);
    dup2(devnull, 0);
    dup2(out, 1);
    dup2(err, 2);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  CommandResult r;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int st = 0;
  while (true) {
    pid_t w = waitpid(pid, &st, WNOHANG);
    if (w == pid) break;
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &st, 0);
      r.stderr_text = "timed out\n";
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  r.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  r.stdout_text = ReadFile(out_path);
  r.stderr_text += ReadFile(err_path);
  return r;
}

std::unique_ptr<Quantd> Quantd::Start(const QuantdOptions& o) {
  auto q = std::unique_ptr<Quantd>(new Quantd());
  const std::string port_file = o.data_dir + "/port";
  fs::remove(port_file);
  std::vector<std::string> argv = {Runfile("server/quantd"),
                                   "--listen=127.0.0.1:0",
                                   "--data-dir=" + o.data_dir,
                                   "--port-file=" + port_file,
                                   "--local-workers=" + std::to_string(o.local_workers),
                                   "--worker-binary=" + Runfile("worker/quantd-worker"),
                                   "--lease-duration=" + o.lease_duration};
  if (!o.store.empty()) argv.push_back("--store=" + o.store);
  argv.push_back("--allowed-uri-roots=" + Join(o.allowed_uri_roots.value_or(DefaultRoots())));
  for (const auto& f : o.extra_flags) argv.push_back(f);
  q->process_ = Process::Start(argv, o.data_dir + "/quantd.log");
  // A ceiling for a hang only: a loaded machine starts quantd slowly.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(600);
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream in(port_file);
    std::string addr;
    if (in && std::getline(in, addr) && !addr.empty()) {
      q->address_ = addr;
      return q;
    }
    if (!q->process_->Running()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return nullptr;
}

std::unique_ptr<quantd::v1::QuantizationService::Stub> Quantd::NewClient() const {
  return quantd::v1::QuantizationService::NewStub(
      grpc::CreateChannel(address_, grpc::InsecureChannelCredentials()));
}

void Quantd::Stop() { process_->Stop(SIGTERM); }

std::unique_ptr<Process> StartWorker(const std::string& address, const std::string& data_dir,
                                     const std::string& worker_id,
                                     const std::vector<std::string>& extra) {
  std::vector<std::string> argv = {Runfile("worker/quantd-worker"), "--server=" + address,
                                   "--device=cpu", "--data-dir=" + data_dir,
                                   "--worker-id=" + worker_id, "--lease-wait-seconds=1"};
  bool roots = false;
  for (const auto& e : extra) roots |= e.rfind("--allowed-roots", 0) == 0;
  if (!roots) argv.push_back("--allowed-roots=" + Join(DefaultRoots()));
  for (const auto& e : extra) argv.push_back(e);
  return Process::Start(argv, data_dir + "/" + worker_id + ".log");
}

CommandResult Quantctl(const std::string& address, const std::vector<std::string>& args,
                       std::chrono::seconds timeout) {
  std::vector<std::string> argv = {Runfile("client/quantctl/quantctl"), "--server=" + address};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommand(argv, timeout);
}

quantd::v1::Job GetJob(quantd::v1::QuantizationService::Stub& api, const std::string& name) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  quantd::v1::GetJobRequest req;
  req.set_name(name);
  quantd::v1::Job job;
  grpc::Status s = api.GetJob(&ctx, req, &job);
  EXPECT_TRUE(s.ok()) << name << ": " << s.error_message();
  return job;
}

std::vector<quantd::v1::JobEvent> Events(quantd::v1::QuantizationService::Stub& api,
                                         const std::string& name) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  quantd::v1::WatchJobRequest req;
  req.set_name(name);
  auto reader = api.WatchJob(&ctx, req);
  std::vector<quantd::v1::JobEvent> out;
  quantd::v1::JobEvent ev;
  while (reader->Read(&ev)) out.push_back(ev);
  return out;
}

bool IsTerminal(quantd::v1::JobState s) {
  return s == quantd::v1::SUCCEEDED || s == quantd::v1::FAILED || s == quantd::v1::CANCELLED;
}

quantd::v1::Job WaitForJob(quantd::v1::QuantizationService::Stub& api, const std::string& name,
                           std::chrono::seconds stall) {
  return WaitWhileJobMoves(
      name,
      [&](quantd::v1::Job* job) {
        grpc::ClientContext ctx;
        quantd::v1::GetJobRequest req;
        req.set_name(name);
        return api.GetJob(&ctx, req, job).ok();
      },
      stall);
}

quantd::v1::Job WaitWhileJobMoves(const std::string& name,
                                  const std::function<bool(quantd::v1::Job*)>& get,
                                  std::chrono::seconds stall) {
  quantd::v1::Job job;
  std::string last;  // what the job looked like when it last moved
  auto moved = std::chrono::steady_clock::now();
  while (true) {
    if (get(&job) && IsTerminal(job.state())) return job;
    const std::string now = std::to_string(job.state()) + "/" + std::to_string(job.attempt()) +
                            "/" + std::to_string(job.progress().stage()) + "/" +
                            std::to_string(job.progress().block()) + "/" +
                            std::to_string(static_cast<int>(job.progress().percent()));
    if (now != last) {
      last = now;
      moved = std::chrono::steady_clock::now();
    } else if (std::chrono::steady_clock::now() - moved > stall) {
      ADD_FAILURE() << name << " did not move for " << stall.count() << " s (state "
                    << quantd::v1::JobState_Name(job.state()) << ")";
      return job;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

bool WaitUntil(const std::function<bool()>& done, std::chrono::seconds ceiling,
               std::chrono::milliseconds poll) {
  const auto deadline = std::chrono::steady_clock::now() + ceiling;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(poll);
  }
  return true;
}

std::string LastLine(const std::string& text) {
  const size_t end = text.find_last_not_of("\r\n");
  if (end == std::string::npos) return "";
  const size_t start = text.find_last_of('\n', end);
  return text.substr(start == std::string::npos ? 0 : start + 1,
                     end - (start == std::string::npos ? 0 : start + 1) + 1);
}

}  // namespace quantd::e2e
