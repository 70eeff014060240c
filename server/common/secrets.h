// Random secrets and the digests quantd keeps of them instead of the
// secrets themselves (lease secrets): drawn from the kernel's CSPRNG,
// hashed with SHA-256, compared in constant time.
#ifndef QUANTD_SERVER_COMMON_SECRETS_H_
#define QUANTD_SERVER_COMMON_SECRETS_H_

#include <string>

#include "absl/strings/string_view.h"
#include "worker/common/status.h"

namespace quantd::server {

// `bytes` random bytes from getrandom(2), as 2 * bytes lowercase hex
// digits. INTERNAL (reason RANDOMNESS_UNAVAILABLE) if the kernel cannot
// supply them; never a weaker source.
quantd::StatusOr<std::string> RandomHex(int bytes);

// The 32-byte (binary) SHA-256 digest of `data`.
std::string Sha256Digest(absl::string_view data);

// Whether `a` and `b` are equal, in time that depends only on their
// lengths (which are not secret: digests are always 32 bytes).
bool ConstantTimeEquals(absl::string_view a, absl::string_view b);

}  // namespace quantd::server

#endif  // QUANTD_SERVER_COMMON_SECRETS_H_
