#include "worker/io/uri/http_download.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "worker/common/sha256.h"
#include "worker/io/uri/curl_request.h"

namespace quantd::io {
namespace {

namespace fs = std::filesystem;

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

  const std::string tmp = target.string() + ".part." + std::to_string(getpid());
  FILE* file = std::fopen(tmp.c_str(), "wb");
  if (!file) return Status(StatusCode::kUnavailable, "cannot write " + tmp);
  Sha256 hash;
  bool write_failed = false;
  CurlRequest request;
  request.url = url;
  request.limits = options.limits;
  request.max_body_bytes = options.max_bytes;
  request.on_body = [&](const char* data, size_t n) {
    if (std::fwrite(data, 1, n, file) != n) return !(write_failed = true);
    hash.Update(data, n);
    return true;
  };
  const CurlResponse response = PerformCurlRequest(request);
  const bool close_failed = std::fclose(file) != 0;

  auto fail = [&](Status s) {
    std::remove(tmp.c_str());
    return s;
  };
  const std::string what = "downloading " + url;
  if (write_failed || close_failed)
    return fail(UnavailableError(what + ": writing the cache failed"));
  if (Status s = CurlResponseStatus(response, what, options.max_bytes); !s.ok()) return fail(s);
  result.sha256 = hash.HexDigest();
  if (!options.expected_sha256.empty() && result.sha256 != options.expected_sha256) {
    return fail(DataLossError(what + ": sha256 " + result.sha256 + " does not match the expected " +
                              options.expected_sha256));
  }
  fs::rename(tmp, target, ec);
  if (ec) return fail(UnavailableError(what + ": cannot move into the cache: " + ec.message()));
  result.downloaded = true;
  return result;
}

}  // namespace quantd::io
