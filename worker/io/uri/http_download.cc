#include "worker/io/uri/http_download.h"

#include <curl/curl.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <mutex>

#include "worker/common/sha256.h"

namespace quantd::io {
namespace {

namespace fs = std::filesystem;

void InitCurlOnce() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct Sink {
  FILE* file = nullptr;
  Sha256 hash;
  uint64_t bytes = 0;
  uint64_t max_bytes = 0;
  bool too_big = false;
  bool write_failed = false;
};

size_t WriteBody(char* data, size_t size, size_t nmemb, void* user) {
  auto* sink = static_cast<Sink*>(user);
  const size_t n = size * nmemb;
  if (sink->bytes + n > sink->max_bytes) {
    sink->too_big = true;
    return 0;  // makes curl abort with CURLE_WRITE_ERROR
  }
  if (std::fwrite(data, 1, n, sink->file) != n) {
    sink->write_failed = true;
    return 0;
  }
  sink->hash.Update(data, n);
  sink->bytes += n;
  return n;
}

// The last path segment without query, as a safe file name.
std::string FileNameOf(const std::string& url) {
  std::string path = url.substr(0, url.find_first_of("?#"));
  const size_t scheme = path.find("://");
  if (scheme != std::string::npos) path = path.substr(scheme + 3);
  const size_t slash = path.rfind('/');
  std::string name = slash == std::string::npos ? "" : path.substr(slash + 1);
  for (char& c : name) {
    if (!(isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_')) c = '_';
  }
  if (name.empty() || name == "." || name == "..") name = "download";
  return name;
}

}  // namespace

StatusOr<HttpDownloadResult> HttpDownload(const std::string& url,
                                          const HttpDownloadOptions& options) {
  if (options.cache_dir.empty()) {
    return FailedPreconditionError(
        "downloading " + url + " needs a download cache directory (UriOptions.download_cache_dir)");
  }
  const fs::path dir = fs::path(options.cache_dir) / Sha256Hex(url).substr(0, 32);
  const fs::path target = dir / FileNameOf(url);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    return Status(StatusCode::kUnavailable,
                  "cannot create download cache " + dir.string() + ": " + ec.message());
  }

  HttpDownloadResult result;
  result.path = target.string();
  if (fs::is_regular_file(target, ec)) {
    QD_ASSIGN_OR_RETURN(result.sha256, Sha256File(target.string()));
    if (options.expected_sha256.empty() || result.sha256 == options.expected_sha256) {
      return result;
    }
    fs::remove(target, ec);  // stale or corrupt: fetch again
  }

  InitCurlOnce();
  const std::string tmp = target.string() + ".part." + std::to_string(getpid());
  Sink sink;
  sink.max_bytes = options.max_bytes;
  sink.file = std::fopen(tmp.c_str(), "wb");
  if (!sink.file) {
    return Status(StatusCode::kUnavailable, "cannot write " + tmp);
  }
  CURL* curl = curl_easy_init();
  char error[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS, static_cast<long>(CURLPROTO_HTTP | CURLPROTO_HTTPS));
  curl_easy_setopt(curl, CURLOPT_REDIR_PROTOCOLS,
                   static_cast<long>(CURLPROTO_HTTP | CURLPROTO_HTTPS));
  curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(curl, CURLOPT_MAXREDIRS, 5L);
  curl_easy_setopt(curl, CURLOPT_FAILONERROR, 1L);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(options.connect_timeout_ms));
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(options.timeout_ms));
  if (options.min_bytes_per_second > 0) {
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT,
                     static_cast<long>(options.min_bytes_per_second));
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, 30L);
  }
  curl_easy_setopt(curl, CURLOPT_MAXFILESIZE_LARGE, static_cast<curl_off_t>(options.max_bytes));
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, WriteBody);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &sink);
  const CURLcode rc = curl_easy_perform(curl);
  long http_code = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &http_code);
  curl_easy_cleanup(curl);
  const bool close_failed = std::fclose(sink.file) != 0;

  auto fail = [&](Status s) {
    std::remove(tmp.c_str());
    return s;
  };
  const std::string what = "downloading " + url + ": ";
  if (sink.too_big || rc == CURLE_FILESIZE_EXCEEDED) {
    return fail(ResourceExhaustedError(what + "larger than the limit of " +
                                       std::to_string(options.max_bytes) + " bytes"));
  }
  if (rc == CURLE_OPERATION_TIMEDOUT) {
    return fail(Status(StatusCode::kDeadlineExceeded, what + "timed out (" + error + ")"));
  }
  if (rc == CURLE_HTTP_RETURNED_ERROR) {
    const std::string msg = what + "HTTP " + std::to_string(http_code);
    if (http_code == 404 || http_code == 410) return fail(NotFoundError(msg));
    if (http_code == 401 || http_code == 403) return fail(PermissionDeniedError(msg));
    return fail(UnavailableError(msg));
  }
  if (rc != CURLE_OK || sink.write_failed || close_failed) {
    return fail(UnavailableError(
        what + (rc != CURLE_OK ? std::string(error[0] ? error : curl_easy_strerror(rc))
                               : std::string("writing the cache failed"))));
  }
  result.sha256 = sink.hash.HexDigest();
  if (!options.expected_sha256.empty() && result.sha256 != options.expected_sha256) {
    return fail(DataLossError(what + "sha256 " + result.sha256 + " does not match the expected " +
                              options.expected_sha256));
  }
  fs::rename(tmp, target, ec);
  if (ec) return fail(UnavailableError(what + "cannot move into the cache: " + ec.message()));
  result.downloaded = true;
  return result;
}

}  // namespace quantd::io
