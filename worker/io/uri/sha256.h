// SHA-256 digests (OpenSSL), for download checks and artifact hashes.
#ifndef QUANTD_WORKER_IO_URI_SHA256_H_
#define QUANTD_WORKER_IO_URI_SHA256_H_

#include <memory>
#include <string>
#include <string_view>

#include "worker/common/status.h"

namespace quantd::io {

// Incremental digest: Update() with the bytes in order, then HexDigest().
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void Update(const void* data, size_t n);
  // Lower-case hex; the object is spent afterwards.
  std::string HexDigest();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

std::string Sha256Hex(std::string_view data);
// NOT_FOUND / DATA_LOSS naming the file on I/O errors.
StatusOr<std::string> Sha256OfFile(const std::string& path);

}  // namespace quantd::io

#endif  // QUANTD_WORKER_IO_URI_SHA256_H_
