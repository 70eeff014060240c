// The Hugging Face Hub's HTTP protocol, as its client library uses it, for
// hf://ORG/NAME[@REVISION] models: resolve the revision to a commit, list the
// commit's files, and download only those a job reads into the shared hub
// cache, in the cache's own layout:
//
//   <cache>/models--ORG--NAME/blobs/<etag>               the file's bytes
//   <cache>/models--ORG--NAME/snapshots/<commit>/<file>  -> ../../blobs/<etag>
//   <cache>/models--ORG--NAME/refs/<revision>            the commit
//   <cache>/.locks/models--ORG--NAME/<etag>.lock         one downloader per blob
//
// (datasets: datasets--ORG--NAME). The etag is the LFS sha256 for LFS files
// and the git blob id otherwise, as the Hub's ETag / X-Linked-Etag headers
// give them. Every file is fetched from the resolved commit, never from a
// moving branch, so one job's files all come from one commit. A blob is
// written to <etag>.incomplete and renamed when its size (and, for LFS files,
// its sha256) checked out; an interrupted transfer resumes from the bytes
// already on disk with a ranged GET, within the call (a few attempts) and in
// a later one. Several processes sharing the cache download each blob once:
// the blob's lock file is held (flock) while it is fetched.
//
// Everything the Hub says is untrusted: the revision listing is parsed under
// size and depth limits, file names that are not plain relative names are
// ignored, sizes and counts are capped, and a redirect may only go to http(s)
// (https only from an https endpoint). The token is sent as a bearer header
// to the endpoint's host only and never appears in a message.
#ifndef QUANTD_WORKER_IO_URI_HF_HUB_H_
#define QUANTD_WORKER_IO_URI_HF_HUB_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "worker/common/status.h"
#include "worker/io/uri/curl_request.h"

namespace quantd::io {

struct HubRepo {
  std::string type = "model";  // "model" or "dataset"
  std::string org;             // may be empty (a legacy id without organisation)
  std::string name;
  std::string revision = "main";  // a branch, tag or commit

  std::string Id() const { return org.empty() ? name : org + "/" + name; }
  // The repository's directory name in the cache (models--ORG--NAME).
  std::string CacheDirName() const;
};

struct HubFileProgress {
  std::string file;
  uint64_t bytes_done = 0;
  uint64_t bytes_total = 0;
};

struct HubOptions {
  std::string endpoint = "https://huggingface.co";  // no trailing slash needed
  std::string token;                                // empty: anonymous
  std::string cache_dir;                            // required
  // The files to fetch: top-level files named in `names` or ending in one of
  // `suffixes`. Files in subfolders are never fetched.
  std::vector<std::string> names;
  std::vector<std::string> suffixes;
  // Instead (datasets): picks the files to fetch from every listed path of
  // plain relative segments, subfolders included (IsHubRelativePath); its
  // error fails the fetch.
  std::function<StatusOr<std::vector<std::string>>(const std::vector<std::string>& listed)>
      choose_files;
  uint64_t max_file_bytes = 64ull << 30;
  uint64_t max_total_bytes = 256ull << 30;
  size_t max_files = 4096;  // files listed in a revision
  TransferLimits limits;    // per transfer
  int max_attempts = 4;                 // transfers per file, resuming each time
  int64_t retry_backoff_ms = 200;       // doubled after each failed attempt
  // Called as a file downloads (at most every 8 MiB, and at its end).
  std::function<void(const HubFileProgress&)> on_progress;
};

struct HubSnapshot {
  std::string commit;              // 40 hex digits
  std::string snapshot_dir;        // <cache>/<repo dir>/snapshots/<commit>
  std::vector<std::string> files;  // fetched (or already cached) file paths
  int files_downloaded = 0;
  uint64_t bytes_downloaded = 0;
};

// Resolves `repo.revision` and brings the selected files of that commit into
// the cache. NOT_FOUND for an unknown repository, revision or file;
// PERMISSION_DENIED for 401/403 (a private or gated repository without a
// valid token: the message says to set HF_TOKEN) and for a redirect to a
// scheme that is not allowed; DATA_LOSS when a file's size or sha256 differs
// from what the listing declared; RESOURCE_EXHAUSTED past a size or count
// limit; DEADLINE_EXCEEDED / UNAVAILABLE for network failures that the
// retries did not overcome.
StatusOr<HubSnapshot> FetchHubSnapshot(const HubRepo& repo, const HubOptions& options);

// The file list of a dataset commit as the Hub listed it. A fetch that
// chooses files (a dataset split) keeps it beside the snapshots, at
// <cache>/<repo dir>/quantd-listings/<commit>, one path per line, so that an
// offline run can tell a split the cache holds whole from one it holds in
// part. Returns nullopt when the cache has no listing of the commit (it was
// filled by another client); DATA_LOSS for a listing that is not one.
StatusOr<std::optional<std::vector<std::string>>> ReadHubListing(const std::string& repo_dir,
                                                                 const std::string& commit);

// How a process reaches the Hub: the endpoint ("" when offline) and token.
struct HubAccess {
  std::string endpoint;
  std::string token;
};

// The Hub settings of a worker, as the Hub's own client takes them:
// `endpoint_flag`, else $HF_ENDPOINT, else https://huggingface.co; none when
// `offline` or $HF_HUB_OFFLINE is 1/true/yes; the token from `token_file`
// (a mounted secret; surrounding white space dropped), else $HF_TOKEN.
// INVALID_ARGUMENT for an endpoint that is not http(s)://host[:port][/path]
// or a token file that cannot be read (the message names the file, never
// its content).
StatusOr<HubAccess> HubAccessFromEnvironment(const std::string& endpoint_flag, bool offline,
                                             const std::string& token_file);

// True for a full commit id (40 lower-case hex digits).
bool IsCommitId(const std::string& revision);

}  // namespace quantd::io

#endif  // QUANTD_WORKER_IO_URI_HF_HUB_H_
