// Runs tests/hub/fake_hub.py (a stand-in for the Hugging Face Hub's HTTP API)
// as a child process for a test, and reads its request log.
#ifndef QUANTD_TESTS_HUB_FAKE_HUB_PROCESS_H_
#define QUANTD_TESTS_HUB_FAKE_HUB_PROCESS_H_

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/testing/port_file_server.h"

namespace quantd::testing {

class FakeHub {
 public:
  // Starts the server with `args` (e.g. {"--model", "org/name=/dir"}) and
  // waits until it listens. `work_dir` holds its port file and log. Returns
  // null (and prints why) when it does not start.
  static std::unique_ptr<FakeHub> Start(const std::vector<std::string>& args,
                                        const std::string& work_dir);
  ~FakeHub() = default;  // stops the server (SIGTERM)
  FakeHub(const FakeHub&) = delete;
  FakeHub& operator=(const FakeHub&) = delete;

  // http://127.0.0.1:<port>
  std::string Endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }
  // Every request so far, one JSON object each (method, path, query, range,
  // auth, status, body_bytes).
  std::vector<nlohmann::json> Requests() const;
  // The GET requests whose path starts with `prefix`.
  std::vector<nlohmann::json> Gets(const std::string& prefix) const;
  // The log's raw text (to check that a secret never reached it).
  std::string LogText() const;

 private:
  FakeHub() = default;
  std::unique_ptr<PortFileServer> server_;
  int port_ = 0;
  std::string log_path_;
};

// The sha256 (lower-case hex) of a file's bytes.
std::string FileSha256(const std::string& path);

}  // namespace quantd::testing

#endif  // QUANTD_TESTS_HUB_FAKE_HUB_PROCESS_H_
