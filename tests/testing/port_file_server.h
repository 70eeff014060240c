// A test server run as a child process that writes the port it listens on
// to a file (tests/hub/fake_hub.py, tests/peers/s3_server.mjs): started,
// waited for, and stopped with SIGTERM when the test is done.
#ifndef QUANTD_TESTS_TESTING_PORT_FILE_SERVER_H_
#define QUANTD_TESTS_TESTING_PORT_FILE_SERVER_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

namespace quantd::testing {

// A file's whole content ("" when it cannot be read).
std::string ReadTextFile(const std::string& path);

class PortFileServer {
 public:
  // Runs `argv` (argv[0] a path) with `port_file` among its arguments as the
  // caller wrote them, its stderr in `log_path`, and waits until the port
  // file holds a port. Null (after printing why) when it exits first.
  static std::unique_ptr<PortFileServer> Start(const std::vector<std::string>& argv,
                                               const std::string& port_file,
                                               const std::string& log_path);
  ~PortFileServer();  // SIGTERM, then waits
  PortFileServer(const PortFileServer&) = delete;
  PortFileServer& operator=(const PortFileServer&) = delete;

  int port() const { return port_; }

 private:
  PortFileServer() = default;
  pid_t pid_ = -1;
  int port_ = 0;
};

}  // namespace quantd::testing

#endif  // QUANTD_TESTS_TESTING_PORT_FILE_SERVER_H_
