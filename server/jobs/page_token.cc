#include "server/jobs/page_token.h"

#include <algorithm>
#include <map>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "server/common/errors.h"
#include "server/jobs/request_validation.h"
#include "worker/common/status.h"

namespace quantd::server {
namespace {

constexpr absl::string_view kVersion = "p1";

// FNV-1a: stable across processes and builds, unlike absl::Hash.
uint64_t Fnv1a(absl::string_view data) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : data) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

quantd::Status BadToken(absl::string_view why) {
  quantd::Status status = MakeError(quantd::StatusCode::kInvalidArgument, "INVALID_PAGE_TOKEN",
                                    absl::StrCat("invalid page_token: ", why));
  AddViolations(status, {{"page_token", std::string(why)}});
  return status;
}

}  // namespace

uint64_t ListQueryFingerprint(const v1::ListJobsRequest& request) {
  std::vector<int> states(request.states().begin(), request.states().end());
  std::sort(states.begin(), states.end());
  states.erase(std::unique(states.begin(), states.end()), states.end());
  std::map<std::string, std::string> labels(request.labels().begin(), request.labels().end());
  std::string canonical = OrderAscending(request.order_by()) ? "asc" : "desc";
  for (int s : states) absl::StrAppend(&canonical, "|s", s);
  for (const auto& [k, v] : labels) {
    absl::StrAppend(&canonical, "|l", k.size(), ":", k, "=", v.size(), ":", v);
  }
  return Fnv1a(canonical);
}

std::string EncodePageToken(const PageToken& token) {
  std::string raw = absl::StrCat(kVersion, "|", absl::ToUnixMicros(token.create_time), "|",
                                 absl::Hex(token.query_fingerprint), "|", token.name);
  return absl::WebSafeBase64Escape(raw);
}

quantd::StatusOr<PageToken> DecodePageToken(absl::string_view encoded,
                                            uint64_t expected_fingerprint) {
  std::string raw;
  if (!absl::WebSafeBase64Unescape(encoded, &raw)) return BadToken("not a token from ListJobs");
  std::vector<absl::string_view> parts = absl::StrSplit(raw, absl::MaxSplits('|', 3));
  int64_t micros = 0;
  uint64_t fingerprint = 0;
  if (parts.size() != 4 || parts[0] != kVersion || !absl::SimpleAtoi(parts[1], &micros) ||
      !absl::SimpleHexAtoi(parts[2], &fingerprint) || parts[3].empty()) {
    return BadToken("not a token from ListJobs");
  }
  if (fingerprint != expected_fingerprint) {
    return BadToken("the token belongs to a query with a different filter or order");
  }
  return PageToken{absl::FromUnixMicros(micros), std::string(parts[3]), fingerprint};
}

}  // namespace quantd::server
