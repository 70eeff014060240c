#include "tests/hub/fake_hub_process.h"

#include <filesystem>
#include <fstream>

#include "worker/common/sha256.h"

namespace quantd::testing {
namespace fs = std::filesystem;

std::unique_ptr<FakeHub> FakeHub::Start(const std::vector<std::string>& args,
                                        const std::string& work_dir) {
  std::unique_ptr<FakeHub> hub(new FakeHub());
  fs::create_directories(work_dir);
  const std::string port_file = work_dir + "/port";
  hub->log_path_ = work_dir + "/requests.jsonl";
  std::vector<std::string> argv = {
      "/usr/bin/python3", "tests/hub/fake_hub.py", "--port-file", port_file, "--log",
      hub->log_path_};
  argv.insert(argv.end(), args.begin(), args.end());
  hub->server_ = PortFileServer::Start(argv, port_file, work_dir + "/server.log");
  if (hub->server_ == nullptr) return nullptr;
  hub->port_ = hub->server_->port();
  return hub;
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

std::string FakeHub::LogText() const { return ReadTextFile(log_path_); }

std::string FileSha256(const std::string& path) {
  auto d = Sha256File(path);
  return d.ok() ? *d : "";
}

}  // namespace quantd::testing
