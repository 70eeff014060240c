#include "server/common/secrets.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <sys/random.h>

#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/common/errors.h"
#include "worker/common/status.h"

namespace quantd::server {

quantd::StatusOr<std::string> RandomHex(int bytes) {
  std::vector<unsigned char> buf(bytes);
  size_t filled = 0;
  while (filled < buf.size()) {
    ssize_t n = getrandom(buf.data() + filled, buf.size() - filled, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return MakeError(quantd::StatusCode::kInternal, "RANDOMNESS_UNAVAILABLE",
                       absl::StrCat("getrandom failed: ", strerror(errno)));
    }
    filled += static_cast<size_t>(n);
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * buf.size());
  for (unsigned char b : buf) {
    out.push_back(kHex[b >> 4]);
    out.push_back(kHex[b & 15]);
  }
  return out;
}

std::string Sha256Digest(absl::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(data.data(), data.size(), digest, &length, EVP_sha256(), nullptr);
  return std::string(reinterpret_cast<const char*>(digest), length);
}

bool ConstantTimeEquals(absl::string_view a, absl::string_view b) {
  if (a.size() != b.size()) return false;
  if (a.empty()) return true;
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace quantd::server
