#include "worker/io/uri/uri.h"

#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <optional>

#include "worker/common/sha256.h"
#include "worker/io/uri/http_download.h"
#include "worker/io/uri/hub_dataset.h"

namespace quantd::io {
namespace {

bool IsHubName(const std::string& s) {
  if (s.empty() || s == "." || s == ".." || s.size() > 96) return false;
  return std::all_of(s.begin(), s.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '-' || c == '_' || c == '.';
  });
}

StatusOr<std::string> Canonical(const std::string& path) {
  char buf[PATH_MAX];
  if (!realpath(path.c_str(), buf)) return NotFoundError(path + " does not exist");
  return std::string(buf);
}

bool SchemeAllowed(const std::string& scheme, const UriOptions& options) {
  return std::find(options.allowed_schemes.begin(), options.allowed_schemes.end(), scheme) !=
         options.allowed_schemes.end();
}

StatusOr<ResolvedUri> ResolveFile(const ParsedUri& p, const ResolveRequest& request,
                                  const UriOptions& options) {
  ResolvedUri r;
  QD_ASSIGN_OR_RETURN(r.local_path, CheckPathAllowed(p.path, options.allowed_roots));
  if (!request.expected_sha256.empty()) {
    struct stat st;
    if (stat(r.local_path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
      return InvalidArgumentError("a sha256 can only be checked for a file, and " + request.uri +
                                  " is a directory");
    }
    QD_ASSIGN_OR_RETURN(r.sha256, Sha256File(r.local_path));
    if (r.sha256 != request.expected_sha256) {
      return DataLossError(request.uri + ": sha256 " + r.sha256 + " does not match the expected " +
                           request.expected_sha256);
    }
  }
  return r;
}

HubRepo RepoOf(const ParsedUri& p) { return HubRepo{p.hub_type, p.host, p.path, p.revision}; }

// A dataset's chosen files under `snapshot`, each checked to stay in the
// roots or the cache.
Status AddDatasetFiles(const ParsedUri& p, const HubDatasetQuery& q,
                       const std::vector<std::string>& chosen, const std::string& snapshot,
                       const UriOptions& options, const std::string& canonical_cache,
                       ResolvedUri& r) {
  std::vector<std::string> sorted = chosen;  // shard 00000 first
  std::sort(sorted.begin(), sorted.end());
  for (const std::string& f : sorted) {
    const std::string path = snapshot + "/" + f;
    QD_RETURN_IF_ERROR(CheckPathAllowed(path, options.allowed_roots, canonical_cache).status());
    r.files.push_back(path);
  }
  r.field = q.field;
  r.dataset_name = RepoOf(p).Id() + ":" + (q.file.empty() ? q.split : q.file);
  return OkStatus();
}

// "a, b, c and 5 more".
std::string JoinFirst(const std::vector<std::string>& items, size_t n) {
  std::string out;
  for (size_t i = 0; i < items.size() && i < n; ++i) out += (i ? ", " : "") + items[i];
  if (items.size() > n) out += " and " + std::to_string(items.size() - n) + " more";
  return out;
}

// The repository paths of the files under a cached snapshot (its entries
// are symlinks into blobs/; folders are walked, never followed as links).
std::vector<std::string> SnapshotFiles(const std::string& snapshot) {
  namespace fs = std::filesystem;
  std::vector<std::string> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(snapshot, ec);
       !ec && it != fs::recursive_directory_iterator() && out.size() < 65536; it.increment(ec)) {
    if (it.depth() > 8) {
      it.disable_recursion_pending();
      continue;
    }
    if (it->is_symlink(ec) || it->is_regular_file(ec)) {
      // Lexically: fs::relative would follow the link into blobs/.
      out.push_back(it->path().lexically_relative(snapshot).string());
    }
  }
  return out;
}

// The snapshot of a revision already in the cache (no network).
StatusOr<ResolvedUri> ResolveHfFromCache(const ParsedUri& p, const ResolveRequest& request,
                                         const UriOptions& options) {
  const std::string cache = HfCacheDir(options);
  const HubRepo repo = RepoOf(p);
  const std::string repo_dir = cache + "/" + repo.CacheDirName();
  struct stat st;
  if (stat(repo_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return NotFoundError(request.uri + ": " + repo_dir +
                         " is not in the Hugging Face cache (the worker is offline: "
                         "populate the cache first, or give it --hf-endpoint)");
  }
  std::string commit = p.revision;
  const std::string ref_file = repo_dir + "/refs/" + p.revision;
  if (stat(ref_file.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
    std::ifstream in(ref_file);
    std::getline(in, commit);
    while (!commit.empty() && std::isspace(static_cast<unsigned char>(commit.back()))) {
      commit.pop_back();
    }
    if (!IsHubName(commit)) {
      return DataLossError(request.uri + ": " + ref_file + " does not hold a commit hash");
    }
  }
  const std::string snapshot = repo_dir + "/snapshots/" + commit;
  if (stat(snapshot.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return NotFoundError(request.uri + ": revision " + p.revision + " has no snapshot " + snapshot);
  }
  ResolvedUri r;
  QD_ASSIGN_OR_RETURN(std::string canonical_cache, Canonical(cache));
  QD_ASSIGN_OR_RETURN(r.local_path,
                      CheckPathAllowed(snapshot, options.allowed_roots, canonical_cache));
  if (IsCommitId(commit)) r.revision = commit;
  if (p.hub_type == "dataset") {
    QD_ASSIGN_OR_RETURN(HubDatasetQuery q, ParseHubDatasetQuery(p.query));
    const std::vector<std::string> cached = SnapshotFiles(snapshot);
    QD_ASSIGN_OR_RETURN(std::optional<std::vector<std::string>> listed,
                        ReadHubListing(repo_dir, commit));
    QD_ASSIGN_OR_RETURN(std::vector<std::string> chosen,
                        SelectHubDatasetFiles(listed ? *listed : cached, q, request.uri));
    if (listed) {
      // A split read whole or not at all: an earlier job may have fetched
      // only one of its files (file=...).
      std::vector<std::string> missing;
      for (const std::string& f : chosen) {
        if (std::find(cached.begin(), cached.end(), f) == cached.end()) missing.push_back(f);
      }
      if (!missing.empty()) {
        std::sort(missing.begin(), missing.end());
        return FailedPreconditionError(request.uri + ": offline, the cache holds " +
                                       std::to_string(chosen.size() - missing.size()) + " of the " +
                                       std::to_string(chosen.size()) + " data files of commit " +
                                       commit + " that this URI reads; missing " +
                                       JoinFirst(missing, 8) +
                                       " (run once with the Hub reachable to fetch them)");
      }
    } else {
      r.warning = "offline: read the " + std::to_string(chosen.size()) +
                  " data file(s) of commit " + commit +
                  " that the cache holds; the cache has no listing of that commit, so it "
                  "cannot tell whether the split has more files";
    }
    QD_RETURN_IF_ERROR(AddDatasetFiles(p, q, chosen, snapshot, options, canonical_cache, r));
  }
  return r;
}

StatusOr<ResolvedUri> ResolveHf(const ParsedUri& p, const ResolveRequest& request,
                                const UriOptions& options) {
  if (options.hf_endpoint.empty()) return ResolveHfFromCache(p, request, options);
  HubOptions hub;
  hub.endpoint = options.hf_endpoint;
  hub.token = options.hf_token;
  hub.cache_dir = HfCacheDir(options);
  hub.names = options.model_files;
  hub.suffixes = options.model_file_suffixes;
  hub.max_file_bytes = options.max_download_bytes;
  hub.limits = options.download_limits;
  hub.on_progress = options.on_hub_progress;
  HubDatasetQuery query;
  if (p.hub_type == "dataset") {
    // allenai/c4 lists tens of thousands of shards; the listing's JSON stays
    // bounded at 16 MiB whatever the count.
    hub.max_files = kMaxHubDatasetListing;
    QD_ASSIGN_OR_RETURN(query, ParseHubDatasetQuery(p.query));
    hub.choose_files = [&](const std::vector<std::string>& listed) {
      return SelectHubDatasetFiles(listed, query, request.uri);
    };
  }
  auto fetched = FetchHubSnapshot(RepoOf(p), hub);
  if (!fetched.ok()) {
    const StatusCode code = fetched.status().code();
    // An unreachable Hub: a revision the cache already holds still runs.
    if (code == StatusCode::kUnavailable || code == StatusCode::kDeadlineExceeded) {
      auto cached = ResolveHfFromCache(p, request, options);
      if (cached.ok()) {
        const std::string partial = cached->warning;
        cached->warning = "the Hub could not be reached (" + fetched.status().message() +
                          "); using the cached snapshot of revision " + p.revision;
        if (!partial.empty()) cached->warning += "; " + partial;
        return cached;
      }
    }
    return fetched.status();
  }
  const bool has_weights =
      std::any_of(fetched->files.begin(), fetched->files.end(), [](const std::string& f) {
        return f.size() > 12 && f.compare(f.size() - 12, 12, ".safetensors") == 0;
      });
  if (!has_weights && p.hub_type == "model" &&
      std::find(options.model_file_suffixes.begin(), options.model_file_suffixes.end(),
                ".safetensors") != options.model_file_suffixes.end()) {
    return FailedPreconditionError(request.uri + ": commit " + fetched->commit +
                                   " has no *.safetensors weights (quantd reads safetensors "
                                   "only; PyTorch .bin pickles are never loaded)");
  }
  ResolvedUri r;
  QD_ASSIGN_OR_RETURN(std::string canonical_cache, Canonical(hub.cache_dir));
  QD_ASSIGN_OR_RETURN(r.local_path, CheckPathAllowed(fetched->snapshot_dir, options.allowed_roots,
                                                     canonical_cache));
  r.revision = fetched->commit;
  if (p.hub_type == "dataset") {
    QD_RETURN_IF_ERROR(AddDatasetFiles(p, query, fetched->files, fetched->snapshot_dir, options,
                                       canonical_cache, r));
  }
  r.files_downloaded = fetched->files_downloaded;
  r.bytes_downloaded = fetched->bytes_downloaded;
  r.downloaded = fetched->files_downloaded > 0;
  return r;
}

StatusOr<ResolvedUri> ResolveHttp(const ResolveRequest& request, const UriOptions& options) {
  HttpDownloadOptions d;
  d.cache_dir = options.download_cache_dir;
  d.max_bytes = options.max_download_bytes;
  d.limits = options.download_limits;
  d.expected_sha256 = request.expected_sha256;
  QD_ASSIGN_OR_RETURN(HttpDownloadResult got, HttpDownload(request.uri, d));
  ResolvedUri r;
  QD_ASSIGN_OR_RETURN(std::string cache_root, Canonical(options.download_cache_dir));
  QD_ASSIGN_OR_RETURN(r.local_path, CheckPathAllowed(got.path, options.allowed_roots, cache_root));
  r.sha256 = got.sha256;
  r.downloaded = got.downloaded;
  return r;
}

StatusOr<ResolvedUri> ResolveS3(const ParsedUri& p, const ResolveRequest& request,
                                const UriOptions& options) {
  if (options.s3.endpoint.empty()) {
    return FailedPreconditionError(request.uri + ": this worker has no S3 endpoint");
  }
  if (options.download_cache_dir.empty()) {
    return FailedPreconditionError(request.uri + ": s3:// needs a download cache directory");
  }
  S3Options s3 = options.s3;
  s3.limits = options.download_limits;
  s3.max_object_bytes = options.max_download_bytes;
  const std::string cache = options.download_cache_dir + "/s3";
  std::error_code ec;
  std::filesystem::create_directories(cache, ec);
  QD_ASSIGN_OR_RETURN(
      std::string local,
      S3Client(s3).Fetch(p.host, p.path, cache, options.model_files, options.model_file_suffixes));
  ResolvedUri r;
  QD_ASSIGN_OR_RETURN(std::string cache_root, Canonical(cache));
  QD_ASSIGN_OR_RETURN(r.local_path, CheckPathAllowed(local, options.allowed_roots, cache_root));
  return r;
}

}  // namespace

std::string HfCacheDir(const UriOptions& options) {
  if (!options.hf_cache_dir.empty()) return options.hf_cache_dir;
  if (const char* v = getenv("HF_HUB_CACHE"); v && *v) return v;
  if (const char* v = getenv("HF_HOME"); v && *v) return std::string(v) + "/hub";
  const char* home = getenv("HOME");
  return std::string(home ? home : "") + "/.cache/huggingface/hub";
}

StatusOr<std::string> CheckPathAllowed(const std::string& path,
                                       const std::vector<std::string>& roots,
                                       const std::string& extra_root) {
  QD_ASSIGN_OR_RETURN(std::string canonical, Canonical(path));
  if (roots.empty()) return canonical;
  if (!extra_root.empty() && PathIsUnder(canonical, extra_root)) return canonical;
  for (const auto& root : roots) {
    auto root_canonical = Canonical(root);
    if (root_canonical.ok() && PathIsUnder(canonical, *root_canonical)) return canonical;
  }
  return PermissionDeniedError(path + " resolves to " + canonical +
                               ", which is outside the allowed roots");
}

StatusOr<ResolvedUri> ResolveUri(const ResolveRequest& request, const UriOptions& options) {
  QD_ASSIGN_OR_RETURN(ParsedUri p, ParseUri(request.uri));
  if (!SchemeAllowed(p.scheme, options)) {
    return PermissionDeniedError("URI scheme '" + p.scheme + "' is not allowed here (" +
                                 request.uri + ")");
  }
  if (p.scheme == "file") return ResolveFile(p, request, options);
  if (p.scheme == "hf") return ResolveHf(p, request, options);
  if (p.scheme == "s3") return ResolveS3(p, request, options);
  return ResolveHttp(request, options);
}

}  // namespace quantd::io
