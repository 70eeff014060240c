// The one URI parser of quantd: the frontend's URI policy
// (server/uri_policy), the engine's spec check and the worker's resolver all
// split and decode a job's URIs here, so the path a policy checks is byte for
// byte the path the worker opens. Percent-decoding happens once, here.
//
//   file:///abs/path       (file://localhost/abs/path)
//   hf://ORG/NAME[@REV]    a model on the Hugging Face Hub
//   hf://datasets/ORG/NAME[@REV][?split=..&config=..&field=..&file=..]
//                          a dataset on the Hub (hub_dataset.h)
//   http(s)://host/path[?query]
//   s3://BUCKET/KEY        an object, or a prefix ("directory"), in S3
//
// file:// URIs are refused when they carry what could make the checked path
// differ from the written one: a query ('?') or fragment ('#'), an encoded
// '/' (%2F), a NUL or other control byte, a malformed %-escape, a host other
// than empty or localhost (all INVALID_ARGUMENT, reason INVALID_URI), or a
// '.' or '..' segment, also percent-encoded (PERMISSION_DENIED, reason
// URI_NOT_ALLOWED: an attempt to leave a root). Repeated and trailing
// slashes are dropped. Decoding happens once: "%252e%252e" is the file name
// "%2e%2e", not "..".
#ifndef QUANTD_WORKER_IO_URI_URI_PARSER_H_
#define QUANTD_WORKER_IO_URI_URI_PARSER_H_

#include <string>

#include "worker/common/status.h"

namespace quantd::io {

struct ParsedUri {
  std::string scheme;  // lower case: file, hf, http, https or s3
  // http(s): host[:port], lower case; hf: ORG (may be empty); s3: the
  // bucket; file: empty.
  std::string host;
  // file: decoded absolute path; http(s): decoded path; hf: NAME; s3: "/"
  // and the decoded key.
  std::string path;
  // http(s) and hf://datasets: "?..." as written (empty when none)
  std::string query;
  std::string revision;  // hf only ("main" when absent)
  std::string hub_type;  // hf only: "model" or "dataset"
};

// Longest file:// path accepted (bytes, decoded), as PATH_MAX.
inline constexpr size_t kMaxUriPathBytes = 4096;

// Splits, decodes and validates `uri` without touching the file system.
// INVALID_ARGUMENT (INVALID_URI) for malformed URIs and unknown schemes (the
// message names the accepted forms); PERMISSION_DENIED (URI_NOT_ALLOWED) for
// a '.' or '..' path segment.
StatusOr<ParsedUri> ParseUri(const std::string& uri);

// The file:// URI of the absolute `path`, percent-encoding what the parser
// would otherwise read as syntax ('%', '?', '#') and control bytes, so that
// ParseUri(PathToFileUri(p))->path == p for a path without '.'/'..'
// components or repeated slashes.
std::string PathToFileUri(const std::string& path);

// `uri` quoted for an error message: non-printable bytes as \xNN, at most
// 256 bytes of it.
std::string QuoteUri(const std::string& uri);

// True when `path` is absolute and `root` is "/" or equal to it or one of
// its ancestors ("/srv/out" holds "/srv/out/a", not "/srv/outside").
bool PathIsUnder(const std::string& path, const std::string& root);

}  // namespace quantd::io

#endif  // QUANTD_WORKER_IO_URI_URI_PARSER_H_
