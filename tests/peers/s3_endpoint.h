// An S3 endpoint for a test: tests/peers/s3_server.mjs (s3rver) as a child
// process, and tests/peers/s3_objects.mjs (the AWS SDK) to seed and read
// it independently of quantd's own S3 client. The npm packages are
// installed first (tests/peers/setup.sh).
#ifndef QUANTD_TESTS_PEERS_S3_ENDPOINT_H_
#define QUANTD_TESTS_PEERS_S3_ENDPOINT_H_

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/testing/port_file_server.h"

namespace quantd::testing {

class S3Endpoint {
 public:
  // `buckets` exist from the start; `extra` are more s3_server.mjs flags.
  // Requests must be signed with kAccessKey and `secret_key`.
  static std::unique_ptr<S3Endpoint> Start(const std::string& work_dir,
                                           const std::vector<std::string>& buckets,
                                           const std::vector<std::string>& extra = {},
                                           const std::string& secret_key = kSecretKey);
  std::string Url() const { return "http://127.0.0.1:" + std::to_string(server_->port()); }
  // s3rver's credentials, which it checks signatures with.
  static constexpr char kAccessKey[] = "S3RVER";
  static constexpr char kSecretKey[] = "S3RVER";
  // Uploads `file` through the AWS SDK.
  bool Put(const std::string& bucket, const std::string& key, const std::string& file) const;
  // {"objects": [{"key", "size", "sha256"}]} through the AWS SDK.
  nlohmann::json List(const std::string& bucket, const std::string& prefix) const;

 private:
  std::string Sdk() const;  // the s3_objects.mjs command line prefix

  std::unique_ptr<PortFileServer> server_;
  std::string work_dir_;
  std::string secret_key_;
};

}  // namespace quantd::testing

#endif  // QUANTD_TESTS_PEERS_S3_ENDPOINT_H_
