// One HTTP(S) GET through libcurl with the limits every download of quantd
// shares: http/https only (also after a redirect, and https only when the
// request started on https), bounded redirects, connect / total / low-speed
// timeouts, a cap on the body, an optional bearer token that curl never sends
// to another host, and an optional starting byte (a Range request).
//
// The body goes to a callback; the response headers are collected per
// response, so that a caller can read the headers of the first response
// (before a redirect) and of the last one.
#ifndef QUANTD_WORKER_IO_URI_CURL_REQUEST_H_
#define QUANTD_WORKER_IO_URI_CURL_REQUEST_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "worker/common/status.h"

namespace quantd::io {

// Time limits of one transfer, shared by every kind of download.
struct TransferLimits {
  int64_t connect_timeout_ms = 10'000;
  int64_t timeout_ms = 3'600'000;       // the whole transfer
  int64_t min_bytes_per_second = 1024;  // over 30 s; 0 disables
};

// AWS Signature Version 4 (libcurl's CURLOPT_AWS_SIGV4) for S3.
struct AwsSigning {
  std::string region;
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;  // sent as x-amz-security-token when set
};

struct CurlRequest {
  std::string url;
  bool head_only = false;
  std::string method;                 // "" : GET (HEAD with head_only); PUT, POST, DELETE
  const std::string* body = nullptr;  // PUT / POST body (kept alive by the caller)
  std::vector<std::string> headers;   // extra "Name: value" lines
  // When set, the request is signed for S3 (the body's sha256 is signed
  // too); the secret never appears in a message.
  const AwsSigning* aws = nullptr;
  // Sent as "Authorization: Bearer ..." to the URL's host only (curl drops
  // it on a redirect to another host). Never part of a message.
  std::string bearer_token;
  // > 0: resume at this byte ("Range: bytes=<range_start>-"). A server that
  // answers with the whole body instead fails the transfer (curl_code
  // CURLE_RANGE_ERROR) before any byte reaches on_body.
  uint64_t range_start = 0;
  bool follow_redirects = true;
  long max_redirects = 5;
  TransferLimits limits;
  uint64_t max_body_bytes = 64ull << 30;
  // Receives the body in pieces; returning false aborts the transfer.
  std::function<bool(const char* data, size_t size)> on_body;
};

struct CurlResponse {
  // Headers of each response in order (a redirect adds one), names lower case.
  std::vector<std::map<std::string, std::string>> headers;
  long http_status = 0;       // of the last response
  uint64_t body_bytes = 0;    // bytes handed to on_body
  bool body_too_big = false;  // stopped at max_body_bytes
  bool aborted_by_callback = false;
  int curl_code = 0;       // CURLcode
  std::string curl_error;  // curl's message, empty when OK

  // A header of the first / last response ("" when absent).
  std::string FirstHeader(const std::string& lower_name) const;
  std::string LastHeader(const std::string& lower_name) const;
  bool TransferOk() const { return curl_code == 0; }
  // The body went past max_body_bytes (or the server announced that it would).
  bool BodyTooBig() const;
  // The server ignored the Range of a resumed request.
  bool RangeRefused() const;
  // The transfer broke off in a way a retry may fix (connection dropped,
  // partial body, timeout, a 5xx or 429 answer).
  bool Retryable() const;
};

// Performs the request. Never fails itself: the outcome is in the response.
CurlResponse PerformCurlRequest(const CurlRequest& request);

// The Status a failed response maps to, with `what` (a URL or a name, never a
// credential) leading the message: NOT_FOUND for 404/410, PERMISSION_DENIED
// for 401/403 and for a redirect to another scheme, RESOURCE_EXHAUSTED past
// max_body_bytes, DEADLINE_EXCEEDED on a timeout, UNAVAILABLE otherwise.
// OK for a successful transfer (any 2xx / 3xx status).
Status CurlResponseStatus(const CurlResponse& response, const std::string& what,
                          uint64_t max_body_bytes);

}  // namespace quantd::io

#endif  // QUANTD_WORKER_IO_URI_CURL_REQUEST_H_
