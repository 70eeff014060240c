// Bearer-token authentication. Tokens are never stored: quantd reads a file
// of SHA-256 hashes, each mapped to a tenant and a role, and hashes the
// token a call presents ("authorization: Bearer <token>") to find its
// entry. File format, one token per line ('#' starts a comment):
//
//   <sha256 hex of the token>  <tenant>  <submitter|admin|worker>
//
// The tenant of a worker token is ignored (write "-"). Create an entry with
//   printf %s "$TOKEN" | sha256sum
// A caller's identity is "sha256:<that hex>": leases are bound to it.
#ifndef QUANTD_SERVER_AUTH_TOKEN_AUTHENTICATOR_H_
#define QUANTD_SERVER_AUTH_TOKEN_AUTHENTICATOR_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "server/grpc/authenticator.h"
#include "worker/common/status.h"

namespace quantd::server {

// Lowercase hex SHA-256.
std::string Sha256Hex(absl::string_view data);

class TokenAuthenticator : public Authenticator {
 public:
  // Parses a token file. INVALID_ARGUMENT naming the line for a malformed
  // entry; NOT_FOUND when the file cannot be read.
  static quantd::StatusOr<std::unique_ptr<TokenAuthenticator>> FromFile(const std::string& path);
  static quantd::StatusOr<std::unique_ptr<TokenAuthenticator>> FromText(absl::string_view text);

  // Registers a token known in plain text (quantd's generated credential
  // for its own local workers). The caller's identity is set from the token.
  void AddToken(absl::string_view token, const Caller& caller);

  // Reads the call's "authorization" metadata.
  quantd::StatusOr<Caller> Authenticate(const grpc::ServerContext& context) override;

  // The same, from the header value (nullopt: no header). UNAUTHENTICATED
  // with reason MISSING_CREDENTIALS or INVALID_TOKEN.
  quantd::StatusOr<Caller> AuthenticateHeader(std::optional<absl::string_view> authorization);

  int size();

 private:
  TokenAuthenticator() = default;

  absl::Mutex mu_;
  absl::flat_hash_map<std::string, Caller> by_hash_ ABSL_GUARDED_BY(mu_);
};

}  // namespace quantd::server

#endif  // QUANTD_SERVER_AUTH_TOKEN_AUTHENTICATOR_H_
