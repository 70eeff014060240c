#include "tests/hub/fake_hub_process.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "worker/common/sha256.h"

namespace quantd::testing {
namespace {
namespace fs = std::filesystem;

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}
}  // namespace

std::unique_ptr<FakeHub> FakeHub::Start(const std::vector<std::string>& args,
                                        const std::string& work_dir) {
  std::unique_ptr<FakeHub> hub(new FakeHub());
  fs::create_directories(work_dir);
  const std::string port_file = work_dir + "/port";
  hub->log_path_ = work_dir + "/requests.jsonl";
  fs::remove(port_file);
  std::vector<std::string> argv = {
      "/usr/bin/python3", "tests/hub/fake_hub.py", "--port-file", port_file, "--log",
      hub->log_path_};
  argv.insert(argv.end(), args.begin(), args.end());
  const std::string server_log = work_dir + "/server.log";
  hub->pid_ = fork();
  if (hub->pid_ == 0) {
    std::vector<char*> cargv;
    for (auto& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    FILE* out = std::freopen(server_log.c_str(), "w", stderr);
    (void)out;
    execv(cargv[0], cargv.data());
    _exit(127);
  }
  // Waits for the port file: a ceiling for a loaded machine, not a budget.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < deadline) {
    if (fs::exists(port_file)) {
      hub->port_ = std::atoi(ReadText(port_file).c_str());
      if (hub->port_ > 0) return hub;
    }
    int status = 0;
    if (waitpid(hub->pid_, &status, WNOHANG) == hub->pid_) {
      std::cerr << "fake_hub.py exited: " << ReadText(server_log) << "\n";
      hub->pid_ = -1;
      return nullptr;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::cerr << "fake_hub.py did not start: " << ReadText(server_log) << "\n";
  return nullptr;
}

FakeHub::~FakeHub() {
  if (pid_ <= 0) return;
  kill(pid_, SIGTERM);
  int status = 0;
  waitpid(pid_, &status, 0);
}

std::vector<nlohmann::json> FakeHub::Requests() const {
  std::vector<nlohmann::json> out;
  std::ifstream in(log_path_);
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded()) out.push_back(j);
  }
  return out;
}

std::vector<nlohmann::json> FakeHub::Gets(const std::string& prefix) const {
  std::vector<nlohmann::json> out;
  for (auto& r : Requests()) {
    if (r.value("method", "") == "GET" && r.value("path", "").rfind(prefix, 0) == 0)
      out.push_back(r);
  }
  return out;
}

std::string FakeHub::LogText() const { return ReadText(log_path_); }

std::string FileSha256(const std::string& path) {
  auto d = Sha256File(path);
  return d.ok() ? *d : "";
}

}  // namespace quantd::testing
