#include "worker/io/uri/hf_hub.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include "worker/common/bounded_json.h"
#include "worker/common/sha256.h"
#include "worker/io/uri/curl_request.h"
#include "worker/io/uri/hub_dataset.h"

namespace quantd::io {
namespace {

namespace fs = std::filesystem;

constexpr char kListingsDir[] = "quantd-listings";
// A listing of kMaxHubDatasetListing paths of a few hundred bytes each.
constexpr uintmax_t kMaxListingFileBytes = uintmax_t{64} << 20;

// A revision listing is a few KiB per hundred files; 4096 files fit easily.
constexpr size_t kMaxListingBytes = size_t{16} << 20;
constexpr uint64_t kProgressEveryBytes = uint64_t{8} << 20;

bool IsHex(const std::string& s, size_t n) {
  return s.size() == n && std::all_of(s.begin(), s.end(), [](unsigned char c) {
           return std::isdigit(c) || (c >= 'a' && c <= 'f');
         });
}

// A top-level file name a job may fetch: no directory part, nothing that a
// path could read as syntax.
bool IsPlainFileName(const std::string& s) {
  if (s.empty() || s.size() > 255 || s == "." || s == "..") return false;
  return std::all_of(s.begin(), s.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '-' || c == '_' || c == '.';
  });
}

std::string EncodeSegment(const std::string& s) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

std::string Unquote(std::string etag) {
  if (etag.rfind("W/", 0) == 0) etag = etag.substr(2);
  if (etag.size() >= 2 && etag.front() == '"' && etag.back() == '"') {
    etag = etag.substr(1, etag.size() - 2);
  }
  return etag;
}

// A repository path for a URL: each segment encoded, the slashes kept (as
// the Hub's client quotes file names).
std::string EncodePath(const std::string& path) {
  std::string out;
  size_t start = 0;
  while (true) {
    const size_t slash = path.find('/', start);
    out += EncodeSegment(path.substr(start, slash == std::string::npos ? slash : slash - start));
    if (slash == std::string::npos) return out;
    out += '/';
    start = slash + 1;
  }
}

struct ListedFile {
  std::string name;
  uint64_t size = 0;
  bool has_size = false;
  std::string etag;  // LFS sha256, or git blob id
  bool lfs = false;
};

struct Listing {
  std::string commit;
  std::vector<ListedFile> files;
};

class HubClient {
 public:
  HubClient(const HubRepo& repo, const HubOptions& options)
      : repo_(repo), options_(options), endpoint_(options.endpoint) {
    while (!endpoint_.empty() && endpoint_.back() == '/') endpoint_.pop_back();
    uri_ = "hf://" + std::string(repo.type == "dataset" ? "datasets/" : "") + repo.Id() + "@" +
           repo.revision;
    repo_dir_ = fs::path(options.cache_dir) / repo.CacheDirName();
  }

  StatusOr<HubSnapshot> Fetch() {
    if (options_.cache_dir.empty()) {
      return FailedPreconditionError(uri_ + ": no Hugging Face cache directory is configured");
    }
    QD_ASSIGN_OR_RETURN(Listing listing, List());
    std::vector<std::string> chosen;
    if (options_.choose_files) {
      std::vector<std::string> listed;
      for (const ListedFile& f : listing.files) listed.push_back(f.name);
      QD_ASSIGN_OR_RETURN(chosen, options_.choose_files(listed));
    }
    std::vector<ListedFile> wanted;
    uint64_t total = 0;
    for (ListedFile& f : listing.files) {
      if (options_.choose_files ? std::find(chosen.begin(), chosen.end(), f.name) == chosen.end()
                                : !Wanted(f.name))
        continue;
      if (!f.has_size || f.etag.empty()) QD_RETURN_IF_ERROR(Head(listing.commit, f));
      if (f.size > options_.max_file_bytes) {
        return ResourceExhaustedError(uri_ + ": " + f.name + " is " + std::to_string(f.size) +
                                      " bytes; at most " + std::to_string(options_.max_file_bytes));
      }
      total += f.size;
      wanted.push_back(f);
    }
    if (total > options_.max_total_bytes) {
      return ResourceExhaustedError(uri_ + ": the files to fetch are " + std::to_string(total) +
                                    " bytes; at most " + std::to_string(options_.max_total_bytes));
    }
    HubSnapshot snap;
    snap.commit = listing.commit;
    const fs::path snapshot = repo_dir_ / "snapshots" / listing.commit;
    snap.snapshot_dir = snapshot.string();
    std::error_code ec;
    fs::create_directories(snapshot, ec);
    fs::create_directories(repo_dir_ / "blobs", ec);
    if (ec)
      return UnavailableError(uri_ + ": cannot create " + repo_dir_.string() + ": " + ec.message());
    for (const ListedFile& f : wanted) {
      QD_RETURN_IF_ERROR(FetchFile(listing.commit, f, snapshot, snap));
      snap.files.push_back(f.name);
    }
    if (options_.choose_files) {
      std::string names;
      for (const ListedFile& f : listing.files) names += f.name + "\n";
      QD_RETURN_IF_ERROR(WriteAtomically(repo_dir_ / kListingsDir / listing.commit, names));
    }
    if (repo_.revision != listing.commit) {
      QD_RETURN_IF_ERROR(WriteAtomically(repo_dir_ / "refs" / repo_.revision, listing.commit));
    }
    return snap;
  }

 private:
  std::string ApiUrl() const {
    return endpoint_ + "/api/" + (repo_.type == "dataset" ? "datasets/" : "models/") + repo_.Id() +
           "/revision/" + EncodeSegment(repo_.revision) + "?blobs=true";
  }
  std::string ResolveUrl(const std::string& commit, const std::string& file) const {
    return endpoint_ + "/" + (repo_.type == "dataset" ? "datasets/" : "") + repo_.Id() +
           "/resolve/" + commit + "/" + EncodePath(file);
  }

  CurlRequest Request(const std::string& url) const {
    CurlRequest r;
    r.url = url;
    r.bearer_token = options_.token;
    r.limits = options_.limits;
    return r;
  }

  // The status of a failed Hub request, in the words a user acts on.
  Status HubError(const CurlResponse& r, const std::string& what, uint64_t limit) const {
    Status s = CurlResponseStatus(r, uri_ + ": " + what, limit);
    if (s.code() == StatusCode::kPermissionDenied &&
        (r.http_status == 401 || r.http_status == 403)) {
      return PermissionDeniedError(
          uri_ + ": the Hub refused access (HTTP " + std::to_string(r.http_status) + "); " +
          (options_.token.empty()
               ? "the repository is private or gated: give the worker a token with read access "
                 "(HF_TOKEN, or --hf-token-file)"
               : "the worker's token has no read access to it"));
    }
    if (s.code() == StatusCode::kNotFound) {
      const std::string code = r.LastHeader("x-error-code");
      if (code == "RevisionNotFound") {
        return NotFoundError(uri_ + ": revision '" + repo_.revision + "' does not exist");
      }
      if (code == "EntryNotFound") return NotFoundError(uri_ + ": " + what + ": no such file");
      return NotFoundError(uri_ + ": no such repository on " + endpoint_ +
                           " (or it is private and the worker has no token for it)");
    }
    return s;
  }

  StatusOr<Listing> List() const {
    std::string body;
    CurlRequest req = Request(ApiUrl());
    req.max_body_bytes = kMaxListingBytes;
    req.limits.timeout_ms = std::min<int64_t>(options_.limits.timeout_ms, 300'000);
    req.on_body = [&](const char* d, size_t n) {
      body.append(d, n);
      return true;
    };
    CurlResponse r = PerformCurlRequest(req);
    for (int attempt = 1; !r.TransferOk() && r.Retryable() && attempt < options_.max_attempts;
         ++attempt) {
      Backoff(attempt);
      body.clear();
      r = PerformCurlRequest(req);
    }
    if (!r.TransferOk()) return HubError(r, "listing the revision", kMaxListingBytes);
    QD_ASSIGN_OR_RETURN(nlohmann::json j,
                        ParseBoundedJson(body, JsonBounds{kMaxListingBytes},
                                         uri_ + ": the revision listing", StatusCode::kDataLoss));
    Listing out;
    if (!j.is_object() || !j.contains("sha") || !j["sha"].is_string() ||
        !IsCommitId(j["sha"].get<std::string>())) {
      return DataLossError(uri_ + ": the Hub's revision listing has no commit id (\"sha\")");
    }
    out.commit = j["sha"].get<std::string>();
    if (!j.contains("siblings") || !j["siblings"].is_array()) {
      return DataLossError(uri_ + ": the Hub's revision listing has no file list (\"siblings\")");
    }
    if (j["siblings"].size() > options_.max_files) {
      return ResourceExhaustedError(uri_ + ": the revision lists " +
                                    std::to_string(j["siblings"].size()) + " files; at most " +
                                    std::to_string(options_.max_files));
    }
    for (const nlohmann::json& s : j["siblings"]) {
      if (!s.is_object() || !s.contains("rfilename") || !s["rfilename"].is_string()) continue;
      ListedFile f;
      f.name = s["rfilename"].get<std::string>();
      // Odd names are never fetched; subfolders only when a chooser asks.
      if (!(options_.choose_files ? IsHubRelativePath(f.name) : IsPlainFileName(f.name))) continue;
      if (s.contains("size") && s["size"].is_number_unsigned()) {
        f.size = s["size"].get<uint64_t>();
        f.has_size = true;
      }
      if (s.contains("lfs") && s["lfs"].is_object()) {
        const nlohmann::json& lfs = s["lfs"];
        if (lfs.contains("sha256") && lfs["sha256"].is_string() &&
            IsHex(lfs["sha256"].get<std::string>(), 64)) {
          f.etag = lfs["sha256"].get<std::string>();
          f.lfs = true;
        }
        if (lfs.contains("size") && lfs["size"].is_number_unsigned()) {
          f.size = lfs["size"].get<uint64_t>();
          f.has_size = true;
        }
      } else if (s.contains("blobId") && s["blobId"].is_string() &&
                 IsHex(s["blobId"].get<std::string>(), 40)) {
        f.etag = s["blobId"].get<std::string>();
      }
      out.files.push_back(std::move(f));
    }
    return out;
  }

  // For a listing without sizes or blob ids: the resolve endpoint's headers,
  // as the Hub's client reads them (X-Linked-* for LFS files).
  Status Head(const std::string& commit, ListedFile& f) const {
    CurlRequest req = Request(ResolveUrl(commit, f.name));
    req.head_only = true;
    req.follow_redirects = false;
    const CurlResponse r = PerformCurlRequest(req);
    if (!r.TransferOk()) return HubError(r, f.name, options_.max_file_bytes);
    const std::string linked = Unquote(r.FirstHeader("x-linked-etag"));
    f.lfs = IsHex(linked, 64);
    f.etag = f.lfs ? linked : Unquote(r.FirstHeader("etag"));
    const std::string size =
        f.lfs ? r.FirstHeader("x-linked-size") : r.FirstHeader("content-length");
    char* end = nullptr;
    const unsigned long long n = std::strtoull(size.c_str(), &end, 10);
    if (size.empty() || *end != '\0' || !(IsHex(f.etag, 40) || IsHex(f.etag, 64))) {
      return DataLossError(uri_ + ": the Hub gave " + f.name + " no usable size and etag");
    }
    f.size = n;
    f.has_size = true;
    return OkStatus();
  }

  bool Wanted(const std::string& name) const {
    if (std::find(options_.names.begin(), options_.names.end(), name) != options_.names.end()) {
      return true;
    }
    return std::any_of(
        options_.suffixes.begin(), options_.suffixes.end(), [&](const std::string& s) {
          return name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
        });
  }

  void Backoff(int attempt) const {
    const int64_t ms = options_.retry_backoff_ms << std::min(attempt - 1, 6);
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  }

  static bool IsBlobOfSize(const fs::path& p, uint64_t size) {
    struct stat st;
    return lstat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
           static_cast<uint64_t>(st.st_size) == size;
  }

  Status FetchFile(const std::string& commit, const ListedFile& f, const fs::path& snapshot,
                   HubSnapshot& snap) {
    const fs::path blob = repo_dir_ / "blobs" / f.etag;
    const fs::path link = snapshot / f.name;
    // Relative to the link's folder: one "../" more per subfolder.
    std::string link_target = "../../blobs/" + f.etag;
    for (char c : f.name)
      if (c == '/') link_target = "../" + link_target;
    std::error_code ec;
    fs::create_directories(link.parent_path(), ec);
    if (fs::is_symlink(link, ec) && fs::read_symlink(link, ec).string() == link_target &&
        IsBlobOfSize(blob, f.size)) {
      return OkStatus();  // already in the cache
    }
    // One downloader per blob across processes: the others wait here and
    // then find the blob in place.
    const fs::path lock_dir = fs::path(options_.cache_dir) / ".locks" / repo_.CacheDirName();
    fs::create_directories(lock_dir, ec);
    const std::string lock_path = (lock_dir / (f.etag + ".lock")).string();
    const int lock_fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (lock_fd < 0) return UnavailableError(uri_ + ": cannot open the lock file " + lock_path);
    struct Unlock {
      int fd;
      ~Unlock() { ::close(fd); }  // closing releases the flock
    } unlock{lock_fd};
    while (::flock(lock_fd, LOCK_EX) != 0) {
      if (errno != EINTR) return UnavailableError(uri_ + ": cannot lock " + lock_path);
    }
    if (!IsBlobOfSize(blob, f.size)) QD_RETURN_IF_ERROR(Download(commit, f, blob, snap));
    // The snapshot entry, replaced atomically.
    const fs::path tmp_link = snapshot / (f.name + ".link." + std::to_string(getpid()));
    fs::remove(tmp_link, ec);
    fs::create_symlink(link_target, tmp_link, ec);
    if (!ec) fs::rename(tmp_link, link, ec);
    if (ec) return UnavailableError(uri_ + ": cannot link " + link.string() + ": " + ec.message());
    return OkStatus();
  }

  Status Download(const std::string& commit, const ListedFile& f, const fs::path& blob,
                  HubSnapshot& snap) {
    const fs::path partial = blob.string() + ".incomplete";
    const std::string what = f.name;
    Status last = OkStatus();
    for (int attempt = 1; attempt <= options_.max_attempts; ++attempt) {
      if (attempt > 1) Backoff(attempt - 1);
      uint64_t offset = 0;
      struct stat st;
      if (lstat(partial.c_str(), &st) == 0) {
        if (!S_ISREG(st.st_mode))
          return DataLossError(uri_ + ": " + partial.string() + " is not a file");
        offset = static_cast<uint64_t>(st.st_size);
      }
      if (offset > f.size) offset = 0;  // not a prefix of this blob
      Sha256 hash;
      if (offset > 0 && f.lfs) QD_RETURN_IF_ERROR(HashPrefix(partial, offset, hash));
      FILE* out = std::fopen(partial.c_str(), offset > 0 ? "ab" : "wb");
      if (out == nullptr) return UnavailableError(uri_ + ": cannot write " + partial.string());
      uint64_t done = offset;
      uint64_t reported = offset;
      bool write_failed = false;
      CurlResponse r;
      if (offset < f.size) {
        CurlRequest req = Request(ResolveUrl(commit, f.name));
        req.range_start = offset;
        req.max_body_bytes = f.size - offset;
        req.on_body = [&](const char* d, size_t n) {
          if (std::fwrite(d, 1, n, out) != n) return !(write_failed = true);
          if (f.lfs) hash.Update(d, n);
          done += n;
          if (options_.on_progress && done - reported >= kProgressEveryBytes) {
            reported = done;
            options_.on_progress({f.name, done, f.size});
          }
          return true;
        };
        r = PerformCurlRequest(req);
        snap.bytes_downloaded += r.body_bytes;
      }
      const bool close_failed = std::fclose(out) != 0;
      if (write_failed || close_failed) {
        return UnavailableError(uri_ + ": writing " + partial.string() + " failed");
      }
      if (!r.TransferOk()) {
        if (r.RangeRefused()) {  // start over from the first byte
          std::error_code ec;
          fs::remove(partial, ec);
          last = HubError(r, what, f.size);
          continue;
        }
        last = HubError(r, what, f.size);
        if (r.BodyTooBig()) {
          std::error_code ec;
          fs::remove(partial, ec);
          return DataLossError(uri_ + ": " + f.name + " is longer than the " +
                               std::to_string(f.size) + " bytes the Hub listed");
        }
        if (r.Retryable()) continue;  // resume from what arrived
        return last;
      }
      const std::string served_commit = r.FirstHeader("x-repo-commit");
      if (!served_commit.empty() && served_commit != commit) {
        return DataLossError(uri_ + ": asked for " + f.name + " at commit " + commit +
                             " and got commit " + served_commit);
      }
      if (done < f.size) {
        last = UnavailableError(uri_ + ": " + f.name + " ended after " + std::to_string(done) +
                                " of " + std::to_string(f.size) + " bytes");
        continue;
      }
      if (f.lfs) {
        const std::string got = hash.HexDigest();
        if (got != f.etag) {
          std::error_code ec;
          fs::remove(partial, ec);
          return DataLossError(uri_ + ": " + f.name + " has sha256 " + got +
                               ", not the LFS sha256 " + f.etag + " the Hub listed");
        }
      }
      if (options_.on_progress && reported < done) options_.on_progress({f.name, done, f.size});
      std::error_code ec;
      fs::rename(partial, blob, ec);
      if (ec)
        return UnavailableError(uri_ + ": cannot move " + f.name +
                                " into the cache: " + ec.message());
      ++snap.files_downloaded;
      return OkStatus();
    }
    return last.Prepend("after " + std::to_string(options_.max_attempts) + " attempts: ");
  }

  Status HashPrefix(const fs::path& path, uint64_t bytes, Sha256& hash) const {
    std::ifstream in(path, std::ios::binary);
    std::vector<char> buf(1 << 20);
    while (bytes > 0 && in) {
      in.read(buf.data(), static_cast<std::streamsize>(std::min<uint64_t>(buf.size(), bytes)));
      const auto n = static_cast<uint64_t>(in.gcount());
      if (n == 0) break;
      hash.Update(buf.data(), n);
      bytes -= n;
    }
    if (bytes != 0) return UnavailableError(uri_ + ": cannot read " + path.string());
    return OkStatus();
  }

  Status WriteAtomically(const fs::path& path, const std::string& text) const {
    std::error_code ec;
    fs::create_directories(path.parent_path(), ec);
    // Unique per writer: two fetches of one repository in one process (two
    // threads) must not share a temporary file.
    static std::atomic<uint64_t> writes{0};
    const fs::path tmp =
        path.string() + ".tmp." + std::to_string(getpid()) + "." + std::to_string(++writes);
    {
      std::ofstream out(tmp, std::ios::trunc);
      out << text;
      if (!out.flush()) return UnavailableError(uri_ + ": cannot write " + tmp.string());
    }
    fs::rename(tmp, path, ec);
    if (ec) return UnavailableError(uri_ + ": cannot write " + path.string() + ": " + ec.message());
    return OkStatus();
  }

  const HubRepo& repo_;
  const HubOptions& options_;
  std::string endpoint_;
  std::string uri_;
  fs::path repo_dir_;
};

}  // namespace

std::string HubRepo::CacheDirName() const {
  return std::string(type == "dataset" ? "datasets--" : "models--") +
         (org.empty() ? name : org + "--" + name);
}

StatusOr<std::optional<std::vector<std::string>>> ReadHubListing(const std::string& repo_dir,
                                                                 const std::string& commit) {
  if (!IsCommitId(commit)) return std::optional<std::vector<std::string>>();
  const fs::path path = fs::path(repo_dir) / kListingsDir / commit;
  std::error_code ec;
  if (!fs::is_regular_file(fs::symlink_status(path, ec))) {
    return std::optional<std::vector<std::string>>();
  }
  const uintmax_t size = fs::file_size(path, ec);
  if (ec || size > kMaxListingFileBytes) {
    return DataLossError(path.string() + " is not a listing quantd wrote (" +
                         (ec ? ec.message() : std::to_string(size) + " bytes") + ")");
  }
  std::ifstream in(path);
  std::vector<std::string> files;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    if (files.size() == kMaxHubDatasetListing) {
      return DataLossError(path.string() + " lists more than " +
                           std::to_string(kMaxHubDatasetListing) + " files");
    }
    files.push_back(line);
  }
  return std::optional<std::vector<std::string>>(std::move(files));
}

bool IsCommitId(const std::string& revision) { return IsHex(revision, 40); }

StatusOr<HubAccess> HubAccessFromEnvironment(const std::string& endpoint_flag, bool offline,
                                             const std::string& token_file) {
  auto env = [](const char* name) {
    const char* v = getenv(name);
    return std::string(v != nullptr ? v : "");
  };
  HubAccess access;
  std::string off = env("HF_HUB_OFFLINE");
  std::transform(off.begin(), off.end(), off.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (!offline && off != "1" && off != "true" && off != "yes" && off != "on") {
    access.endpoint = !endpoint_flag.empty()        ? endpoint_flag
                      : !env("HF_ENDPOINT").empty() ? env("HF_ENDPOINT")
                                                    : "https://huggingface.co";
    const bool http = access.endpoint.rfind("http://", 0) == 0;
    const bool https = access.endpoint.rfind("https://", 0) == 0;
    const size_t host = http ? 7 : 8;
    if ((!http && !https) || access.endpoint.size() <= host ||
        access.endpoint.find_first_of("@?# ") != std::string::npos) {
      return InvalidArgumentError("the Hub endpoint '" + access.endpoint +
                                  "' is not http(s)://host[:port][/path]");
    }
  }
  if (!token_file.empty()) {
    std::ifstream in(token_file);
    std::string token((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!in.good() && !in.eof()) {
      return InvalidArgumentError("cannot read the Hub token file " + token_file);
    }
    if (!in.is_open()) return InvalidArgumentError("cannot read the Hub token file " + token_file);
    const size_t b = token.find_first_not_of(" \t\r\n");
    const size_t e = token.find_last_not_of(" \t\r\n");
    access.token = b == std::string::npos ? "" : token.substr(b, e - b + 1);
  } else {
    access.token = env("HF_TOKEN");
  }
  return access;
}

StatusOr<HubSnapshot> FetchHubSnapshot(const HubRepo& repo, const HubOptions& options) {
  return HubClient(repo, options).Fetch();
}

}  // namespace quantd::io
