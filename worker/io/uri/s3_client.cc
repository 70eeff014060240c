#include "worker/io/uri/s3_client.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "worker/common/sha256.h"

namespace quantd::io {
namespace {

namespace fs = std::filesystem;

// One page of a listing is at most 1000 keys, a few hundred KiB.
constexpr size_t kMaxXmlBytes = size_t{16} << 20;

// AWS's URI encoding: unreserved characters kept, the rest %XX; '/' kept in
// a key's path, encoded in a query value.
std::string AwsEncode(const std::string& s, bool keep_slash) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' ||
        (keep_slash && c == '/')) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

std::string XmlUnescape(const std::string& s) {
  static const std::map<std::string, std::string> kEntities = {
      {"amp", "&"}, {"lt", "<"}, {"gt", ">"}, {"quot", "\""}, {"apos", "'"}};
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    const size_t semi = s[i] == '&' ? s.find(';', i) : std::string::npos;
    if (semi == std::string::npos || semi - i > 8) {
      out += s[i];
      continue;
    }
    const std::string name = s.substr(i + 1, semi - i - 1);
    if (auto it = kEntities.find(name); it != kEntities.end()) {
      out += it->second;
    } else if (name.size() > 1 && name[0] == '#') {
      const long code = name[1] == 'x' ? std::strtol(name.c_str() + 2, nullptr, 16)
                                       : std::strtol(name.c_str() + 1, nullptr, 10);
      if (code > 0 && code < 128) out += static_cast<char>(code);
    } else {
      out += s.substr(i, semi - i + 1);
    }
    i = semi;
  }
  return out;
}

// The text of every <tag>...</tag> in `xml`, in order (S3's responses nest
// no element inside one of the same name).
std::vector<std::string> XmlTexts(const std::string& xml, const std::string& tag) {
  std::vector<std::string> out;
  const std::string open = "<" + tag + ">", close = "</" + tag + ">";
  for (size_t at = xml.find(open); at != std::string::npos; at = xml.find(open, at)) {
    const size_t start = at + open.size();
    const size_t end = xml.find(close, start);
    if (end == std::string::npos) break;
    out.push_back(xml.substr(start, end - start));
    at = end + close.size();
  }
  return out;
}

std::string XmlText(const std::string& xml, const std::string& tag) {
  auto all = XmlTexts(xml, tag);
  return all.empty() ? "" : XmlUnescape(all.front());
}

std::string Unquote(std::string etag) {
  if (etag.size() >= 2 && etag.front() == '"' && etag.back() == '"') {
    etag = etag.substr(1, etag.size() - 2);
  }
  return etag;
}

// A key below `prefix` that names a file a job may fetch: the rest is a
// relative path of plain segments.
bool IsPlainRelativeKey(const std::string& rest) {
  if (rest.empty() || rest.size() > 1024 || rest.front() == '/' || rest.back() == '/') return false;
  size_t start = 0;
  while (start <= rest.size()) {
    size_t end = rest.find('/', start);
    if (end == std::string::npos) end = rest.size();
    const std::string seg = rest.substr(start, end - start);
    if (seg.empty() || seg == "." || seg == "..") return false;
    start = end + 1;
  }
  return std::all_of(rest.begin(), rest.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '/';
  });
}

}  // namespace

std::string S3Client::Url(const std::string& bucket, const std::string& key,
                          const std::string& query) const {
  std::string endpoint = options_.endpoint;
  while (!endpoint.empty() && endpoint.back() == '/') endpoint.pop_back();
  return endpoint + "/" + bucket + "/" + AwsEncode(key, true) + (query.empty() ? "" : "?" + query);
}

CurlRequest S3Client::Request(const std::string& url) const {
  CurlRequest r;
  r.url = url;
  // Without credentials the request goes unsigned (a public bucket).
  r.aws = options_.signing.access_key_id.empty() ? nullptr : &options_.signing;
  r.limits = options_.limits;
  r.max_body_bytes = kMaxXmlBytes;
  return r;
}

CurlResponse S3Client::Perform(const CurlRequest& request) const {
  CurlResponse r = PerformCurlRequest(request);
  for (int attempt = 1; !r.TransferOk() && r.Retryable() && attempt < options_.max_attempts;
       ++attempt) {
    std::this_thread::sleep_for(
        std::chrono::milliseconds(options_.retry_backoff_ms << std::min(attempt - 1, 6)));
    r = PerformCurlRequest(request);
  }
  return r;
}

namespace {

Status S3Error(const CurlResponse& r, const std::string& what, uint64_t limit) {
  Status s = CurlResponseStatus(r, what, limit);
  if (r.http_status == 403) {
    return PermissionDeniedError(what +
                                 ": S3 refused the request (HTTP 403); check the worker's "
                                 "S3 credentials and the bucket's policy");
  }
  if (r.http_status == 404) return NotFoundError(what + ": no such bucket or key (HTTP 404)");
  return s;
}

}  // namespace

StatusOr<std::vector<S3Object>> S3Client::List(const std::string& bucket,
                                               const std::string& prefix) const {
  std::vector<S3Object> out;
  std::string token;
  const std::string what = "s3://" + bucket + "/" + prefix;
  for (int page = 0; page < 1000; ++page) {
    // Query parameters in canonical (sorted) order, encoded as SigV4 signs them.
    std::string query = token.empty() ? "" : "continuation-token=" + AwsEncode(token, false) + "&";
    query += "list-type=2&prefix=" + AwsEncode(prefix, false);
    std::string body;
    CurlRequest req = Request(Url(bucket, "", query));
    req.on_body = [&](const char* d, size_t n) {
      body.append(d, n);
      return true;
    };
    const CurlResponse r = Perform(req);
    if (!r.TransferOk()) return S3Error(r, what + ": listing", kMaxXmlBytes);
    for (const std::string& contents : XmlTexts(body, "Contents")) {
      S3Object o;
      o.key = XmlText(contents, "Key");
      o.etag = Unquote(XmlText(contents, "ETag"));
      const std::string size = XmlText(contents, "Size");
      char* end = nullptr;
      o.size = std::strtoull(size.c_str(), &end, 10);
      if (size.empty() || *end != '\0') {
        return DataLossError(what + ": the listing gives " + o.key + " no size");
      }
      out.push_back(std::move(o));
      if (out.size() > options_.max_objects) {
        return ResourceExhaustedError(what + ": more than " + std::to_string(options_.max_objects) +
                                      " objects under the prefix");
      }
    }
    if (XmlText(body, "IsTruncated") != "true") return out;
    token = XmlText(body, "NextContinuationToken");
    if (token.empty()) return DataLossError(what + ": a truncated listing without a continuation");
  }
  return ResourceExhaustedError(what + ": the listing does not end");
}

Status S3Client::Download(const std::string& bucket, const std::string& key,
                          const std::string& local_path, uint64_t expected_size) const {
  const std::string what = "s3://" + bucket + "/" + key;
  if (expected_size > options_.max_object_bytes) {
    return ResourceExhaustedError(what + " is " + std::to_string(expected_size) +
                                  " bytes; at most " + std::to_string(options_.max_object_bytes));
  }
  // Per process: workers sharing a data directory may fetch the same object.
  const std::string part = local_path + ".part." + std::to_string(getpid());
  std::error_code ec;
  fs::create_directories(fs::path(local_path).parent_path(), ec);
  for (int attempt = 1;; ++attempt) {
    FILE* out = std::fopen(part.c_str(), "wb");
    if (out == nullptr) return UnavailableError(what + ": cannot write " + part);
    bool write_failed = false;
    CurlRequest req = Request(Url(bucket, key));
    req.max_body_bytes = expected_size;
    req.on_body = [&](const char* d, size_t n) {
      if (std::fwrite(d, 1, n, out) != n) return !(write_failed = true);
      return true;
    };
    const CurlResponse r = PerformCurlRequest(req);
    const bool close_failed = std::fclose(out) != 0;
    if (write_failed || close_failed)
      return UnavailableError(what + ": writing " + part + " failed");
    if (!r.TransferOk()) {
      if (r.Retryable() && attempt < options_.max_attempts) continue;
      fs::remove(part, ec);
      if (r.BodyTooBig()) {
        return DataLossError(what + " is longer than the " + std::to_string(expected_size) +
                             " bytes its listing gave");
      }
      return S3Error(r, what, expected_size);
    }
    if (r.body_bytes != expected_size) {
      fs::remove(part, ec);
      return DataLossError(what + " is " + std::to_string(r.body_bytes) + " bytes, not the " +
                           std::to_string(expected_size) + " its listing gave");
    }
    fs::rename(part, local_path, ec);
    if (ec) return UnavailableError(what + ": cannot move into place: " + ec.message());
    return OkStatus();
  }
}

Status S3Client::PutObject(const std::string& bucket, const std::string& key,
                           const std::string& data, const std::string& content_type) const {
  CurlRequest req = Request(Url(bucket, key));
  req.method = "PUT";
  req.body = &data;
  req.headers = {"Content-Type: " + content_type};
  const CurlResponse r = Perform(req);
  if (!r.TransferOk()) return S3Error(r, "s3://" + bucket + "/" + key + ": upload", kMaxXmlBytes);
  return OkStatus();
}

Status S3Client::UploadFile(const std::string& path, const std::string& bucket,
                            const std::string& key, S3UploadedFile* file) const {
  const std::string what = "s3://" + bucket + "/" + key;
  std::ifstream in(path, std::ios::binary);
  if (!in) return UnavailableError("cannot read " + path);
  Sha256 hash;
  auto read_part = [&](uint64_t n, std::string* buf) {
    buf->resize(n);
    in.read(buf->data(), static_cast<std::streamsize>(n));
    buf->resize(static_cast<size_t>(in.gcount()));
    hash.Update(*buf);
    file->bytes += buf->size();
  };
  std::error_code ec;
  const uint64_t size = fs::file_size(path, ec);
  if (ec) return UnavailableError("cannot read " + path + ": " + ec.message());
  std::string buf;
  if (size <= options_.multipart_threshold) {
    read_part(size, &buf);
    if (buf.size() != size) return UnavailableError("cannot read " + path);
    QD_RETURN_IF_ERROR(PutObject(bucket, key, buf, "application/octet-stream"));
    file->sha256 = hash.HexDigest();
    return OkStatus();
  }
  // Multipart: initiate, the parts, complete; abort on any failure.
  std::string reply;
  CurlRequest init = Request(Url(bucket, key, "uploads="));
  init.method = "POST";
  const std::string empty;
  init.body = &empty;
  init.on_body = [&](const char* d, size_t n) {
    reply.append(d, n);
    return true;
  };
  CurlResponse r = Perform(init);
  if (!r.TransferOk()) return S3Error(r, what + ": starting a multipart upload", kMaxXmlBytes);
  const std::string upload_id = XmlText(reply, "UploadId");
  if (upload_id.empty()) return DataLossError(what + ": S3 gave no UploadId");
  const std::string id_query = "uploadId=" + AwsEncode(upload_id, false);
  auto abort = [&](Status s) {
    CurlRequest del = Request(Url(bucket, key, id_query));
    del.method = "DELETE";
    PerformCurlRequest(del);
    return s;
  };
  std::string complete = "<CompleteMultipartUpload>";
  for (int part = 1; file->bytes < size; ++part) {
    if (part > 10000) return abort(ResourceExhaustedError(what + ": more than 10000 parts"));
    read_part(std::min(options_.part_bytes, size - file->bytes), &buf);
    if (buf.empty()) return abort(UnavailableError("cannot read " + path));
    CurlRequest put =
        Request(Url(bucket, key, "partNumber=" + std::to_string(part) + "&" + id_query));
    put.method = "PUT";
    put.body = &buf;
    r = Perform(put);
    if (!r.TransferOk())
      return abort(S3Error(r, what + ": part " + std::to_string(part), kMaxXmlBytes));
    const std::string etag = r.LastHeader("etag");
    if (etag.empty())
      return abort(DataLossError(what + ": S3 gave part " + std::to_string(part) + " no ETag"));
    complete += "<Part><PartNumber>" + std::to_string(part) + "</PartNumber><ETag>" + etag +
                "</ETag></Part>";
  }
  complete += "</CompleteMultipartUpload>";
  reply.clear();
  CurlRequest done = Request(Url(bucket, key, id_query));
  done.method = "POST";
  done.body = &complete;
  done.headers = {"Content-Type: application/xml"};
  done.on_body = [&](const char* d, size_t n) {
    reply.append(d, n);
    return true;
  };
  r = Perform(done);
  // S3 may answer 200 and report the failure in the body.
  if (!r.TransferOk() || reply.find("<Error>") != std::string::npos) {
    return abort(
        r.TransferOk()
            ? UnavailableError(what + ": completing the upload failed: " + XmlText(reply, "Code"))
            : S3Error(r, what + ": completing the upload", kMaxXmlBytes));
  }
  file->sha256 = hash.HexDigest();
  return OkStatus();
}

StatusOr<std::vector<S3UploadedFile>> S3Client::UploadFiles(const std::string& dir,
                                                            const std::vector<std::string>& files,
                                                            const std::string& bucket,
                                                            const std::string& prefix,
                                                            const std::string& job) const {
  for (const std::string& rel : files) {
    struct stat st;
    if (!IsPlainRelativeKey(rel) || rel == kS3ManifestName ||
        lstat((dir + "/" + rel).c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
      return InvalidArgumentError("cannot upload " + rel + " of " + dir +
                                  ": not a regular file with a plain relative name");
    }
  }
  std::vector<S3UploadedFile> out;
  nlohmann::json manifest = {{"job", job}, {"files", nlohmann::json::array()}};
  for (const std::string& rel : files) {
    S3UploadedFile f;
    f.path = rel;
    QD_RETURN_IF_ERROR(UploadFile(dir + "/" + rel, bucket, prefix + "/" + rel, &f));
    manifest["files"].push_back({{"path", f.path}, {"bytes", f.bytes}, {"sha256", f.sha256}});
    out.push_back(std::move(f));
  }
  // Last: its presence says every file above is complete.
  QD_RETURN_IF_ERROR(PutObject(bucket, prefix + "/" + kS3ManifestName, manifest.dump(2) + "\n",
                               "application/json"));
  return out;
}

StatusOr<std::string> S3Client::Fetch(const std::string& bucket, const std::string& uri_path,
                                      const std::string& cache_dir,
                                      const std::vector<std::string>& names,
                                      const std::vector<std::string>& suffixes) const {
  const std::string key = uri_path.empty() ? "" : uri_path.substr(1);
  const std::string what = "s3://" + bucket + uri_path;
  QD_ASSIGN_OR_RETURN(std::vector<S3Object> listed, List(bucket, key));
  // The local copy of an object, kept with its ETag beside it.
  auto bring = [&](const S3Object& o, const std::string& local) -> Status {
    const std::string etag_file = local + ".etag";
    std::ifstream etag_in(etag_file);
    std::string cached_etag;
    std::getline(etag_in, cached_etag);
    struct stat st;
    if (lstat(local.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        static_cast<uint64_t>(st.st_size) == o.size && !o.etag.empty() && cached_etag == o.etag) {
      return OkStatus();
    }
    QD_RETURN_IF_ERROR(Download(bucket, o.key, local, o.size));
    std::ofstream(etag_file) << o.etag << "\n";
    return OkStatus();
  };
  const std::string dir = cache_dir + "/" + Sha256Hex(bucket + "/" + key).substr(0, 32);
  for (const S3Object& o : listed) {
    if (o.key != key || key.empty()) continue;
    const std::string name = fs::path(key).filename().string();
    if (!IsPlainRelativeKey(name)) return InvalidArgumentError(what + ": not a plain file name");
    QD_RETURN_IF_ERROR(bring(o, dir + "/" + name));
    return dir + "/" + name;
  }
  const std::string prefix = key.empty() ? "" : key + "/";
  int fetched = 0;
  bool weights = false;
  for (const S3Object& o : listed) {
    if (o.key.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string rest = o.key.substr(prefix.size());
    if (!IsPlainRelativeKey(rest) || rest.find('/') != std::string::npos) continue;
    const bool wanted =
        std::find(names.begin(), names.end(), rest) != names.end() ||
        std::any_of(suffixes.begin(), suffixes.end(), [&](const std::string& s) {
          return rest.size() > s.size() && rest.compare(rest.size() - s.size(), s.size(), s) == 0;
        });
    if (!wanted) continue;
    QD_RETURN_IF_ERROR(bring(o, dir + "/" + rest));
    ++fetched;
    weights |= rest.size() > 12 && rest.compare(rest.size() - 12, 12, ".safetensors") == 0;
  }
  if (fetched == 0) return NotFoundError(what + ": no such object, and no model files below it");
  if (!weights && std::find(suffixes.begin(), suffixes.end(), ".safetensors") != suffixes.end()) {
    return FailedPreconditionError(what + ": no *.safetensors weights below it");
  }
  return dir;
}

StatusOr<S3Options> S3OptionsFromEnvironment(const std::string& endpoint_flag,
                                             const std::string& credentials_file) {
  auto env = [](const char* name) {
    const char* v = getenv(name);
    return std::string(v != nullptr ? v : "");
  };
  S3Options o;
  o.signing.region = !env("AWS_REGION").empty()           ? env("AWS_REGION")
                     : !env("AWS_DEFAULT_REGION").empty() ? env("AWS_DEFAULT_REGION")
                                                          : "us-east-1";
  o.endpoint = !endpoint_flag.empty()                ? endpoint_flag
               : !env("AWS_ENDPOINT_URL_S3").empty() ? env("AWS_ENDPOINT_URL_S3")
               : !env("AWS_ENDPOINT_URL").empty()
                   ? env("AWS_ENDPOINT_URL")
                   : "https://s3." + o.signing.region + ".amazonaws.com";
  const bool http = o.endpoint.rfind("http://", 0) == 0,
             https = o.endpoint.rfind("https://", 0) == 0;
  if ((!http && !https) || o.endpoint.find_first_of("@?# ") != std::string::npos) {
    return InvalidArgumentError("the S3 endpoint '" + o.endpoint +
                                "' is not http(s)://host[:port]");
  }
  if (!credentials_file.empty()) {
    std::ifstream in(credentials_file);
    if (!in) return InvalidArgumentError("cannot read the S3 credentials file " + credentials_file);
    bool in_default = true;  // keys before any [profile] belong to it
    for (std::string line; std::getline(in, line);) {
      auto trim = [](std::string s) {
        const size_t b = s.find_first_not_of(" \t\r");
        const size_t e = s.find_last_not_of(" \t\r");
        return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
      };
      line = trim(line);
      if (line.empty() || line[0] == '#' || line[0] == ';') continue;
      if (line.front() == '[') {
        in_default = line == "[default]";
        continue;
      }
      const size_t eq = line.find('=');
      if (!in_default || eq == std::string::npos) continue;
      const std::string key = trim(line.substr(0, eq)), value = trim(line.substr(eq + 1));
      if (key == "aws_access_key_id") o.signing.access_key_id = value;
      if (key == "aws_secret_access_key") o.signing.secret_access_key = value;
      if (key == "aws_session_token") o.signing.session_token = value;
    }
    if (o.signing.access_key_id.empty() || o.signing.secret_access_key.empty()) {
      return InvalidArgumentError("the S3 credentials file " + credentials_file +
                                  " has no aws_access_key_id / aws_secret_access_key in [default]");
    }
  } else {
    o.signing.access_key_id = env("AWS_ACCESS_KEY_ID");
    o.signing.secret_access_key = env("AWS_SECRET_ACCESS_KEY");
    o.signing.session_token = env("AWS_SESSION_TOKEN");
  }
  return o;
}

}  // namespace quantd::io
