#include "tests/peers/s3_endpoint.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace quantd::testing {
namespace {

std::string Quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Runs a shell command; its stdout.
std::string Run(const std::string& command, int* rc) {
  std::string out;
  FILE* p = popen(command.c_str(), "r");
  if (p == nullptr) {
    *rc = -1;
    return out;
  }
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof(buf), p)) > 0;) out.append(buf, n);
  *rc = pclose(p);
  return out;
}

}  // namespace

std::unique_ptr<S3Endpoint> S3Endpoint::Start(const std::string& work_dir,
                                              const std::vector<std::string>& buckets,
                                              const std::vector<std::string>& extra,
                                              const std::string& secret_key) {
  int rc = 0;
  Run("bash \"$(dirname \"$(readlink -f tests/peers/package.json)\")/setup.sh\" >&2", &rc);
  if (rc != 0) return nullptr;
  std::unique_ptr<S3Endpoint> s3(new S3Endpoint());
  s3->work_dir_ = work_dir;
  s3->secret_key_ = secret_key;
  std::filesystem::create_directories(work_dir + "/data");
  const std::string port_file = work_dir + "/port";
  std::vector<std::string> argv = {"/usr/bin/env",    "node",    "tests/peers/s3_server.mjs",
                                   "--port-file",     port_file, "--dir",
                                   work_dir + "/data"};
  for (const auto& b : buckets) {
    argv.push_back("--bucket");
    argv.push_back(b);
  }
  argv.push_back("--secret-key");
  argv.push_back(secret_key);
  argv.insert(argv.end(), extra.begin(), extra.end());
  s3->server_ = PortFileServer::Start(argv, port_file, work_dir + "/server.log");
  if (s3->server_ == nullptr) return nullptr;
  return s3;
}

bool S3Endpoint::Put(const std::string& bucket, const std::string& key,
                     const std::string& file) const {
  int rc = 0;
  Run(Sdk() + " put " + Quote(bucket) + " " + Quote(key) + " " + Quote(file) + " 2>>" +
          Quote(work_dir_ + "/sdk.log"),
      &rc);
  return rc == 0;
}

nlohmann::json S3Endpoint::List(const std::string& bucket, const std::string& prefix) const {
  int rc = 0;
  const std::string out = Run(Sdk() + " list " + Quote(bucket) + " " + Quote(prefix) + " 2>>" +
                                  Quote(work_dir_ + "/sdk.log"),
                              &rc);
  auto j = nlohmann::json::parse(out, nullptr, false);
  return rc == 0 && !j.is_discarded() ? j : nlohmann::json();
}

std::string S3Endpoint::Sdk() const {
  return "S3_SECRET_KEY=" + Quote(secret_key_) + " node tests/peers/s3_objects.mjs " + Quote(Url());
}

}  // namespace quantd::testing
