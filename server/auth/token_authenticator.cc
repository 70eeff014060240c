#include "server/auth/token_authenticator.h"

#include <openssl/evp.h>

#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "server/common/errors.h"
#include "worker/common/status.h"
#include "worker/io/uri/uri_roots.h"

namespace quantd::server {
namespace {

quantd::Status Unauthenticated(absl::string_view reason, absl::string_view message) {
  return MakeError(quantd::StatusCode::kUnauthenticated, reason, message);
}

bool IsSha256Hex(absl::string_view s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!absl::ascii_isxdigit(c)) return false;
  }
  return true;
}

}  // namespace

std::string Sha256Hex(absl::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(data.data(), data.size(), digest, &length, EVP_sha256(), nullptr);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < length; ++i) {
    out.push_back(kHex[digest[i] >> 4]);
    out.push_back(kHex[digest[i] & 15]);
  }
  return out;
}

quantd::StatusOr<std::unique_ptr<TokenAuthenticator>> TokenAuthenticator::FromFile(
    const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return MakeError(quantd::StatusCode::kNotFound, "TOKEN_FILE_UNREADABLE",
                     absl::StrCat("cannot read the token file ", path));
  }
  std::stringstream text;
  text << in.rdbuf();
  auto parsed = FromText(text.str());
  if (!parsed.ok()) {
    quantd::Status s = parsed.status();
    return quantd::Status(s.code(), absl::StrCat(path, ": ", s.message()));
  }
  return parsed;
}

quantd::StatusOr<std::unique_ptr<TokenAuthenticator>> TokenAuthenticator::FromText(
    absl::string_view text) {
  std::unique_ptr<TokenAuthenticator> auth(new TokenAuthenticator());
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    line = line.substr(0, line.find('#'));
    std::vector<absl::string_view> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t\r"), absl::SkipEmpty());
    if (fields.empty()) continue;
    auto bad = [&](absl::string_view why) {
      return MakeError(quantd::StatusCode::kInvalidArgument, "INVALID_TOKEN_FILE",
                       absl::StrCat("line ", line_number, ": ", why,
                                    " (expected: <sha256 hex> <tenant> <submitter|admin|worker>)"));
    };
    if (fields.size() != 3) return bad("needs three fields");
    if (!IsSha256Hex(fields[0])) return bad("the first field is not a 64-digit SHA-256 hex");
    Caller caller;
    caller.tenant = std::string(fields[1]);
    if (fields[2] == "submitter") {
      caller.role = Role::kSubmitter;
    } else if (fields[2] == "admin") {
      caller.role = Role::kAdmin;
    } else if (fields[2] == "worker") {
      caller.role = Role::kWorker;
      caller.tenant.clear();
    } else {
      return bad(absl::StrCat("unknown role \"", fields[2], "\""));
    }
    if (caller.role != Role::kWorker && (caller.tenant.empty() || caller.tenant == "-")) {
      return bad("submitter and admin tokens need a tenant");
    }
    // The tenant names directories ({tenant} in URI roots), so it must be a
    // safe path segment; a worker's tenant field is ignored.
    if (caller.role != Role::kWorker && !io::IsSafeTenantSegment(caller.tenant)) {
      return bad(absl::StrCat("tenant \"", absl::CHexEscape(caller.tenant),
                              "\" is not 1 to 128 characters of [A-Za-z0-9._-] "
                              "starting with other than '.'"));
    }
    const std::string hash = absl::AsciiStrToLower(fields[0]);
    caller.identity = absl::StrCat("sha256:", hash);
    absl::MutexLock lock(&auth->mu_);
    if (!auth->by_hash_.emplace(hash, caller).second) {
      return bad("the same token hash appears twice");
    }
  }
  return auth;
}

void TokenAuthenticator::AddToken(absl::string_view token, const Caller& caller_in) {
  const std::string hash = Sha256Hex(token);
  Caller caller = caller_in;
  caller.identity = absl::StrCat("sha256:", hash);
  absl::MutexLock lock(&mu_);
  by_hash_[hash] = caller;
}

int TokenAuthenticator::size() {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(by_hash_.size());
}

quantd::StatusOr<Caller> TokenAuthenticator::Authenticate(const grpc::ServerContext& context) {
  const auto& metadata = context.client_metadata();
  auto it = metadata.find("authorization");
  if (it == metadata.end()) return AuthenticateHeader(std::nullopt);
  return AuthenticateHeader(absl::string_view(it->second.data(), it->second.size()));
}

quantd::StatusOr<Caller> TokenAuthenticator::AuthenticateHeader(
    std::optional<absl::string_view> authorization) {
  if (!authorization.has_value()) {
    return Unauthenticated("MISSING_CREDENTIALS",
                           "this quantd requires a bearer token: send \"authorization: Bearer "
                           "<token>\" metadata");
  }
  absl::string_view value = absl::StripAsciiWhitespace(*authorization);
  if (value.size() < 7 || !absl::EqualsIgnoreCase(value.substr(0, 7), "bearer ")) {
    return Unauthenticated("MISSING_CREDENTIALS",
                           "the authorization metadata must be \"Bearer <token>\"");
  }
  absl::string_view token = absl::StripAsciiWhitespace(value.substr(7));
  std::string hash = Sha256Hex(token);
  absl::MutexLock lock(&mu_);
  auto found = by_hash_.find(hash);
  if (token.empty() || found == by_hash_.end()) {
    return Unauthenticated("INVALID_TOKEN", "the bearer token is not known to this quantd");
  }
  return found->second;
}

}  // namespace quantd::server
