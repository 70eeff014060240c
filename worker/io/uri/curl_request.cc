#include "worker/io/uri/curl_request.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <mutex>

#include "worker/common/sha256.h"

namespace quantd::io {
namespace {

void InitCurlOnce() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct Transfer {
  const CurlRequest* request;
  CurlResponse* response;
};

size_t OnBody(char* data, size_t size, size_t nmemb, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t n = size * nmemb;
  if (t->response->body_bytes + n > t->request->max_body_bytes) {
    t->response->body_too_big = true;
    return 0;  // curl aborts with CURLE_WRITE_ERROR
  }
  if (t->request->on_body && !t->request->on_body(data, n)) {
    t->response->aborted_by_callback = true;
    return 0;
  }
  t->response->body_bytes += n;
  return n;
}

size_t OnHeader(char* data, size_t size, size_t nmemb, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t n = size * nmemb;
  std::string line(data, n);
  while (!line.empty() && (line.back() == '\r' || line.back() == '\n')) line.pop_back();
  if (line.rfind("HTTP/", 0) == 0) {
    t->response->headers.emplace_back();  // a new response (after a redirect)
  } else if (!t->response->headers.empty()) {
    const size_t colon = line.find(':');
    if (colon != std::string::npos && colon > 0) {
      std::string name = line.substr(0, colon);
      std::transform(name.begin(), name.end(), name.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      size_t v = colon + 1;
      while (v < line.size() && (line[v] == ' ' || line[v] == '\t')) ++v;
      t->response->headers.back()[name] = line.substr(v);
    }
  }
  return n;
}

std::string HeaderOf(const std::map<std::string, std::string>& h, const std::string& name) {
  auto it = h.find(name);
  return it == h.end() ? "" : it->second;
}

}  // namespace

std::string CurlResponse::FirstHeader(const std::string& lower_name) const {
  return headers.empty() ? "" : HeaderOf(headers.front(), lower_name);
}

std::string CurlResponse::LastHeader(const std::string& lower_name) const {
  return headers.empty() ? "" : HeaderOf(headers.back(), lower_name);
}

bool CurlResponse::BodyTooBig() const {
  return body_too_big || curl_code == CURLE_FILESIZE_EXCEEDED;
}

bool CurlResponse::RangeRefused() const {
  return curl_code == CURLE_RANGE_ERROR ||
         (curl_code == CURLE_HTTP_RETURNED_ERROR && http_status == 416);
}

bool CurlResponse::Retryable() const {
  switch (curl_code) {
    case CURLE_PARTIAL_FILE:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_COULDNT_CONNECT:
      return true;
    case CURLE_HTTP_RETURNED_ERROR:
      return http_status >= 500 || http_status == 429;
    default:
      return false;
  }
}

CurlResponse PerformCurlRequest(const CurlRequest& request) {
  InitCurlOnce();
  CurlResponse response;
  Transfer transfer{&request, &response};
  CURL* curl = curl_easy_init();
  if (curl == nullptr) {
    response.curl_code = CURLE_FAILED_INIT;
    response.curl_error = "cannot start a libcurl transfer";
    return response;
  }
  char error[CURL_ERROR_SIZE] = {0};
  const bool https = request.url.rfind("https://", 0) == 0;
  const long redirect_protocols = https ? CURLPROTO_HTTPS : (CURLPROTO_HTTP | CURLPROTO_HTTPS);
  curl_easy_setopt(curl, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS, static_cast<long>(CURLPROTO_HTTP | CURLPROTO_HTTPS));
  curl_easy_setopt(curl, CURLOPT_REDIR_PROTOCOLS, redirect_protocols);
  curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, request.follow_redirects ? 1L : 0L);
  curl_easy_setopt(curl, CURLOPT_MAXREDIRS, request.max_redirects);
  curl_easy_setopt(curl, CURLOPT_FAILONERROR, 1L);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(request.limits.connect_timeout_ms));
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(request.limits.timeout_ms));
  if (request.limits.min_bytes_per_second > 0) {
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT,
                     static_cast<long>(request.limits.min_bytes_per_second));
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, 30L);
  }
  curl_easy_setopt(curl, CURLOPT_MAXFILESIZE_LARGE,
                   static_cast<curl_off_t>(request.range_start + request.max_body_bytes));
  // Sizes and digests are of the bytes as stored: no content decoding.
  curl_easy_setopt(curl, CURLOPT_HTTP_CONTENT_DECODING, 0L);
  if (request.head_only) curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
  if (!request.method.empty())
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, request.method.c_str());
  if (request.body != nullptr) {
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE,
                     static_cast<curl_off_t>(request.body->size()));
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, request.body->data());
  }
  struct curl_slist* headers = nullptr;
  std::vector<std::string> lines = request.headers;
  if (request.body != nullptr) lines.push_back("Expect:");  // no 100-continue round trip
  std::string sigv4;
  if (request.aws != nullptr) {
    // The payload's digest, signed with the rest (S3 checks it).
    lines.push_back("x-amz-content-sha256: " +
                    Sha256Hex(request.body != nullptr ? *request.body : std::string()));
    if (!request.aws->session_token.empty()) {
      lines.push_back("x-amz-security-token: " + request.aws->session_token);
    }
    sigv4 = "aws:amz:" + request.aws->region + ":s3";
    curl_easy_setopt(curl, CURLOPT_AWS_SIGV4, sigv4.c_str());
    curl_easy_setopt(curl, CURLOPT_USERNAME, request.aws->access_key_id.c_str());
    curl_easy_setopt(curl, CURLOPT_PASSWORD, request.aws->secret_access_key.c_str());
  }
  for (const std::string& line : lines) headers = curl_slist_append(headers, line.c_str());
  if (headers != nullptr) curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  if (!request.bearer_token.empty()) {
    curl_easy_setopt(curl, CURLOPT_HTTPAUTH, static_cast<long>(CURLAUTH_BEARER));
    curl_easy_setopt(curl, CURLOPT_XOAUTH2_BEARER, request.bearer_token.c_str());
  }
  if (request.range_start > 0) {
    curl_easy_setopt(curl, CURLOPT_RESUME_FROM_LARGE, static_cast<curl_off_t>(request.range_start));
  }
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, OnBody);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &transfer);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, OnHeader);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &transfer);
  const CURLcode rc = curl_easy_perform(curl);
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &response.http_status);
  curl_easy_cleanup(curl);
  curl_slist_free_all(headers);
  response.curl_code = rc;
  if (rc != CURLE_OK) response.curl_error = error[0] ? error : curl_easy_strerror(rc);
  return response;
}

Status CurlResponseStatus(const CurlResponse& r, const std::string& what, uint64_t max_body_bytes) {
  if (r.BodyTooBig()) {
    return ResourceExhaustedError(what + ": larger than the limit of " +
                                  std::to_string(max_body_bytes) + " bytes");
  }
  switch (r.curl_code) {
    case CURLE_OK:
      return OkStatus();
    case CURLE_OPERATION_TIMEDOUT:
      return Status(StatusCode::kDeadlineExceeded, what + ": timed out (" + r.curl_error + ")");
    case CURLE_UNSUPPORTED_PROTOCOL:
      return PermissionDeniedError(what + ": redirected to a scheme that is not allowed (" +
                                   r.curl_error + ")");
    case CURLE_TOO_MANY_REDIRECTS:
      return UnavailableError(what + ": too many redirects");
    case CURLE_HTTP_RETURNED_ERROR: {
      const std::string msg = what + ": HTTP " + std::to_string(r.http_status);
      if (r.http_status == 404 || r.http_status == 410) return NotFoundError(msg);
      if (r.http_status == 401 || r.http_status == 403) return PermissionDeniedError(msg);
      return UnavailableError(msg);
    }
    default:
      return UnavailableError(what + ": " + r.curl_error);
  }
}

}  // namespace quantd::io
