// Opaque ListJobs page tokens. A token is the keyset position of the last
// job on the previous page (create_time, name) plus a fingerprint of the
// query, so a token is refused when it is reused with a different filter or
// order. Tokens carry no authority: the tenant filter always comes from the
// caller, never from the token.
#ifndef QUANTD_SERVER_JOBS_PAGE_TOKEN_H_
#define QUANTD_SERVER_JOBS_PAGE_TOKEN_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "quantd/v1/quantization_service.pb.h"
#include "worker/common/status.h"

namespace quantd::server {

struct PageToken {
  absl::Time create_time;
  std::string name;
  uint64_t query_fingerprint = 0;
};

// A stable hash of everything in the request that shapes the result (order,
// states, labels) except the page size and token.
uint64_t ListQueryFingerprint(const v1::ListJobsRequest& request);

std::string EncodePageToken(const PageToken& token);

// INVALID_ARGUMENT (reason INVALID_PAGE_TOKEN, field page_token) when the
// token is malformed or was issued for a different query.
quantd::StatusOr<PageToken> DecodePageToken(absl::string_view encoded,
                                            uint64_t expected_fingerprint);

}  // namespace quantd::server

#endif  // QUANTD_SERVER_JOBS_PAGE_TOKEN_H_
