// HttpDownload: fetches one http(s) URL into a local download cache through
// libcurl, with size and time limits and an optional sha256 check.
//
// The file lands at <cache>/<sha256 of the URL>/<last path segment>, written
// to a temporary name and renamed only when complete and verified, so a
// crash or a failed check never leaves a partial file where a later job
// would find it. A cached file is reused (re-verified when a sha256 is given).
#ifndef QUANTD_WORKER_IO_URI_HTTP_DOWNLOAD_H_
#define QUANTD_WORKER_IO_URI_HTTP_DOWNLOAD_H_

#include <cstdint>
#include <string>

#include "worker/common/status.h"
#include "worker/io/uri/curl_request.h"

namespace quantd::io {

struct HttpDownloadOptions {
  std::string cache_dir;
  uint64_t max_bytes = 64ull << 30;
  TransferLimits limits;
  std::string expected_sha256;          // lower-case hex; empty: not checked
};

struct HttpDownloadResult {
  std::string path;         // the cached file
  std::string sha256;       // its digest
  bool downloaded = false;  // false: reused from the cache
};

// NOT_FOUND for HTTP 404/410; PERMISSION_DENIED for 401/403;
// RESOURCE_EXHAUSTED past max_bytes; DEADLINE_EXCEEDED on a timeout;
// DATA_LOSS on a sha256 mismatch; UNAVAILABLE for other failures. Messages
// name the URL.
StatusOr<HttpDownloadResult> HttpDownload(const std::string& url,
                                          const HttpDownloadOptions& options);

}  // namespace quantd::io

#endif  // QUANTD_WORKER_IO_URI_HTTP_DOWNLOAD_H_
