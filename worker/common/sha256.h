// SHA-256 (FIPS 180-4), for artifact digests and download checks. Written
// here rather than taken from OpenSSL because the engine must build on GPU
// hosts that have only LibTorch.
#ifndef QUANTD_WORKER_COMMON_SHA256_H_
#define QUANTD_WORKER_COMMON_SHA256_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "worker/common/status.h"

namespace quantd {

class Sha256 {
 public:
  Sha256();
  void Update(const void* data, size_t len);
  void Update(std::string_view s) { Update(s.data(), s.size()); }
  // Finishes the digest; the object must not be updated afterwards.
  std::array<uint8_t, 32> Digest();
  // Lower-case hex of Digest().
  std::string HexDigest();

 private:
  void Block(const uint8_t* p);

  uint32_t h_[8];
  uint8_t buf_[64];
  size_t buf_len_ = 0;
  uint64_t total_ = 0;
};

std::string Sha256Hex(std::string_view data);
// Streams a file; NOT_FOUND / DATA_LOSS name the path.
StatusOr<std::string> Sha256File(const std::string& path);

}  // namespace quantd

#endif  // QUANTD_WORKER_COMMON_SHA256_H_
