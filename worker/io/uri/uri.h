// Model and data URIs: where a job's checkpoint or dataset lives.
//
//   file:///abs/path            a local file or directory
//   hf://datasets/ORG/NAME[@REV][?split=S&config=C&field=F&file=PATH]
//                               a dataset on the Hub: the data files of the
//                               split (hub_dataset.h), fetched like a model's
//   hf://ORG/NAME[@REV]         a model on the Hugging Face Hub (hf_hub.h):
//                               REV (default main) resolved to a commit, the
//                               files a job reads fetched into the shared hub
//                               cache (models--ORG--NAME/snapshots/<commit>/).
//                               Without an endpoint (offline), or when the Hub
//                               cannot be reached, the cache alone serves it
//                               (REV a commit or a ref under refs/)
//   http(s)://host/path         downloaded through libcurl into a local cache
//                               (size and time limits, optional sha256)
//   s3://BUCKET/KEY             an object, or the model files below a prefix,
//                               downloaded into the download cache
//                               (s3_client.h)
//
// URIs are parsed by uri_parser.h (the parser the frontend's policy uses).
// Every resolution ends in a local path that is canonicalised (symlinks
// resolved) and must lie under one of the configured roots: a URI with a
// ".." segment, a symlink that escapes, or a path outside the roots is
// PERMISSION_DENIED, as is a scheme the options do not allow. Which roots a
// job may use is uri_roots.h's to say.
#ifndef QUANTD_WORKER_IO_URI_URI_H_
#define QUANTD_WORKER_IO_URI_URI_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "worker/common/status.h"
#include "worker/io/uri/hf_hub.h"
#include "worker/io/uri/s3_client.h"
#include "worker/io/uri/uri_parser.h"

namespace quantd::io {

struct UriOptions {
  // Schemes that may be resolved: any of "file", "hf", "http", "https", "s3".
  std::vector<std::string> allowed_schemes = {"file", "hf", "http", "https", "s3"};
  // Directories a resolved path must lie under (after canonicalisation).
  // Empty means no restriction; the hub cache and download cache below are
  // always allowed for their own schemes.
  std::vector<std::string> allowed_roots;
  // Hugging Face hub cache; empty: $HF_HUB_CACHE, else $HF_HOME/hub, else
  // $HOME/.cache/huggingface/hub.
  std::string hf_cache_dir;
  // The Hub's HTTP endpoint for hf:// (https://huggingface.co, or a mirror);
  // empty: offline, the cache alone.
  std::string hf_endpoint;
  // A bearer token for private and gated repositories (never in a message).
  std::string hf_token;
  // The files of a model (a Hub repository, an S3 prefix) to fetch: names
  // and name suffixes.
  std::vector<std::string> model_files;
  std::vector<std::string> model_file_suffixes;
  // s3:// (endpoint, region, credentials); an empty endpoint refuses s3://.
  S3Options s3;
  // Called as Hub files download.
  std::function<void(const HubFileProgress&)> on_hub_progress;
  // Where http(s) downloads are kept; required for http(s).
  std::string download_cache_dir;
  uint64_t max_download_bytes = 64ull << 30;
  // Per download (http(s), each Hub file).
  TransferLimits download_limits;
};

struct ResolvedUri {
  std::string local_path;   // canonical absolute path of the file or directory
  std::string sha256;       // hex digest, for downloads (empty otherwise)
  bool downloaded = false;  // false when served from the download cache
  // hf://: the commit the revision resolved to (empty when the cache was
  // read without a ref or commit to say which).
  std::string revision;
  // hf://: the files fetched now and their bytes (0: all were cached).
  int files_downloaded = 0;
  uint64_t bytes_downloaded = 0;
  // hf://datasets: the split's data files (snapshot paths, in order), the
  // query's field ("" when it names none) and a name for results
  // ("ORG/NAME:split", "ORG/NAME:path" for ?file=).
  std::vector<std::string> files;
  std::string field;
  std::string dataset_name;
  // Something the job's user should know (the Hub was unreachable and the
  // cache served the revision); empty otherwise.
  std::string warning;
};

// Per-request expectations.
struct ResolveRequest {
  std::string uri;
  // Lower-case hex sha256 the content must have (http(s) downloads, and
  // file:// regular files); empty: not checked.
  std::string expected_sha256;
};

// Resolves a URI to a local path, downloading when needed. NOT_FOUND when the
// file, snapshot or ref does not exist; PERMISSION_DENIED as described above;
// DATA_LOSS on a sha256 mismatch; RESOURCE_EXHAUSTED past the size limit;
// DEADLINE_EXCEEDED past a time limit; UNAVAILABLE for other network errors.
StatusOr<ResolvedUri> ResolveUri(const ResolveRequest& request, const UriOptions& options);

// Canonicalises `path` and checks it lies under one of `roots` (any when
// empty) or `extra_root` (when not empty). Use it for files opened inside a
// resolved directory. NOT_FOUND when the path does not exist.
StatusOr<std::string> CheckPathAllowed(const std::string& path,
                                       const std::vector<std::string>& roots,
                                       const std::string& extra_root = "");

// The hub cache directory the options resolve to (see hf_cache_dir).
std::string HfCacheDir(const UriOptions& options);

}  // namespace quantd::io

#endif  // QUANTD_WORKER_IO_URI_URI_H_
