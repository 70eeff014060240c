// S3 (and S3-compatible stores: MinIO, Ceph RGW, s3rver) for s3://BUCKET/KEY
// models, datasets and artifacts, over libcurl with AWS Signature Version 4
// (payload digests signed), path-style addressing (ENDPOINT/BUCKET/KEY).
//
// Downloads land in a local directory, each object written to a temporary
// name and renamed when its size matches the listing. Uploads of a directory
// put every file (multipart above a threshold, aborted on failure) and then,
// last, a manifest (quantd-manifest.json: every file's path, size and
// sha256), so that a consumer that waits for the manifest never reads half an
// artifact. Listings are XML parsed under size and count limits; keys that are
// not plain relative names below the prefix are ignored. Credentials are never
// part of a message.
#ifndef QUANTD_WORKER_IO_URI_S3_CLIENT_H_
#define QUANTD_WORKER_IO_URI_S3_CLIENT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "worker/common/status.h"
#include "worker/io/uri/curl_request.h"

namespace quantd::io {

// The manifest an upload writes last.
inline constexpr char kS3ManifestName[] = "quantd-manifest.json";

struct S3Options {
  // http(s)://host[:port]; AWS: https://s3.<region>.amazonaws.com.
  std::string endpoint;
  AwsSigning signing;  // region and credentials
  TransferLimits limits;
  uint64_t max_object_bytes = 64ull << 30;
  size_t max_objects = 4096;  // listed under one prefix
  // Files above this go up in parts of part_bytes (S3: at least 5 MiB but
  // the last, at most 10000 parts).
  uint64_t multipart_threshold = 64ull << 20;
  uint64_t part_bytes = 64ull << 20;
  int max_attempts = 4;  // per request that a retry may fix
  int64_t retry_backoff_ms = 200;
};

struct S3Object {
  std::string key;
  uint64_t size = 0;
  std::string etag;
};

struct S3UploadedFile {
  std::string path;  // relative to the uploaded directory
  uint64_t bytes = 0;
  std::string sha256;
};

class S3Client {
 public:
  explicit S3Client(S3Options options) : options_(std::move(options)) {}

  // Every object under `prefix` (a key prefix, no leading '/'), all pages.
  StatusOr<std::vector<S3Object>> List(const std::string& bucket, const std::string& prefix) const;

  // The object into `local_path` (via a per-process ".part." file); DATA_LOSS when
  // its length is not `expected_size`.
  Status Download(const std::string& bucket, const std::string& key, const std::string& local_path,
                  uint64_t expected_size) const;

  // The files `files` (paths relative to `dir`; regular files, never
  // followed through a link) to `prefix` + "/" + path, then the manifest
  // (`job` names the job in it). Returns the files. On a failure nothing
  // more is written: no manifest, unfinished multipart uploads aborted.
  StatusOr<std::vector<S3UploadedFile>> UploadFiles(const std::string& dir,
                                                    const std::vector<std::string>& files,
                                                    const std::string& bucket,
                                                    const std::string& prefix,
                                                    const std::string& job) const;

  Status PutObject(const std::string& bucket, const std::string& key, const std::string& data,
                   const std::string& content_type) const;

  // Brings `uri_path` ("/" + a key) of `bucket` into `cache_dir`: one object
  // when a key is exactly that (returns the local file), else the objects
  // directly below it as a prefix whose names are in `names` or end in one of
  // `suffixes` (returns the local directory). Files already there with the
  // same size and ETag are kept. NOT_FOUND when nothing matches.
  StatusOr<std::string> Fetch(const std::string& bucket, const std::string& uri_path,
                              const std::string& cache_dir, const std::vector<std::string>& names,
                              const std::vector<std::string>& suffixes) const;

 private:
  std::string Url(const std::string& bucket, const std::string& key,
                  const std::string& query = "") const;
  CurlRequest Request(const std::string& url) const;
  // Performs `request`, retrying what a retry may fix.
  CurlResponse Perform(const CurlRequest& request) const;
  Status UploadFile(const std::string& path, const std::string& bucket, const std::string& key,
                    S3UploadedFile* file) const;

  S3Options options_;
};

// The S3 settings of a worker: `endpoint_flag`, else $AWS_ENDPOINT_URL_S3,
// else $AWS_ENDPOINT_URL, else https://s3.<region>.amazonaws.com; the region
// from $AWS_REGION, else $AWS_DEFAULT_REGION, else us-east-1; credentials
// from `credentials_file` (a mounted secret in the AWS shared-credentials
// form: aws_access_key_id / aws_secret_access_key / aws_session_token lines
// of its [default] profile), else $AWS_ACCESS_KEY_ID,
// $AWS_SECRET_ACCESS_KEY and $AWS_SESSION_TOKEN. INVALID_ARGUMENT for a bad
// endpoint or an unreadable credentials file (named; its content never).
StatusOr<S3Options> S3OptionsFromEnvironment(const std::string& endpoint_flag,
                                             const std::string& credentials_file);

}  // namespace quantd::io

#endif  // QUANTD_WORKER_IO_URI_S3_CLIENT_H_
