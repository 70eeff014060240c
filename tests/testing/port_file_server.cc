#include "tests/testing/port_file_server.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

namespace quantd::testing {
std::string ReadTextFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::unique_ptr<PortFileServer> PortFileServer::Start(const std::vector<std::string>& argv,
                                                      const std::string& port_file,
                                                      const std::string& log_path) {
  std::unique_ptr<PortFileServer> server(new PortFileServer());
  std::filesystem::remove(port_file);
  server->pid_ = fork();
  if (server->pid_ == 0) {
    std::vector<std::string> args = argv;
    std::vector<char*> cargv;
    for (auto& a : args) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    if (std::freopen(log_path.c_str(), "w", stderr) == nullptr) _exit(126);
    execv(cargv[0], cargv.data());
    _exit(127);
  }
  // A ceiling for a loaded machine, not a budget.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < deadline) {
    if (std::filesystem::exists(port_file)) {
      server->port_ = std::atoi(ReadTextFile(port_file).c_str());
      if (server->port_ > 0) return server;
    }
    int status = 0;
    if (waitpid(server->pid_, &status, WNOHANG) == server->pid_) {
      std::cerr << argv[0] << " exited: " << ReadTextFile(log_path) << "\n";
      server->pid_ = -1;
      return nullptr;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::cerr << argv[0] << " did not start: " << ReadTextFile(log_path) << "\n";
  return nullptr;
}

PortFileServer::~PortFileServer() {
  if (pid_ <= 0) return;
  kill(pid_, SIGTERM);
  int status = 0;
  waitpid(pid_, &status, 0);
}

}  // namespace quantd::testing
