// Where a job may read and write: the one policy that quantd's frontend
// (server/uri_policy, --allowed-uri-roots) checks at CreateJob and that
// quantd-worker (--allowed-roots) enforces again before it opens anything.
// Both parse URIs with uri_parser.h and match them here, so they agree on
// every URI.
//
// Roots are URI prefixes the operator names: file:///dir (or /dir),
// https://host/prefix, http://host/prefix, hf://ORG/, hf://ORG/NAME (models),
// hf://datasets/ORG/, hf://datasets/ORG/NAME (datasets: a model root never
// admits a dataset of the same name, nor the reverse) or s3://BUCKET/prefix. A file, http(s) or s3
// root may contain the path segment {tenant}, replaced by the job's tenant
// (file:///srv/out/{tenant}); such a root applies only to jobs whose tenant is a safe path segment
// (IsSafeTenantSegment), so it matches nothing for the empty tenant of an unauthenticated quantd.
//
// - Inputs (model, calibration and evaluation data) must lie under a root;
//   a file:// input is resolved with realpath first (also the existing part
//   of a path that does not exist yet), so a symlink cannot leave the root.
//   With no roots configured every input is refused.
// - Outputs are file:// directories strictly below a file root or below
//   <data-dir>/artifacts/, which is always allowed (the default output
//   location). They are matched without resolving symlinks: the worker walks
//   from the root without following any (worker/export/artifact.h). An
//   s3:// output is a prefix strictly below an s3 root.
//
// Refusals are PERMISSION_DENIED with reason URI_NOT_ALLOWED; the message
// quotes the URI and says what is allowed. Callers prefix the field name.
#ifndef QUANTD_WORKER_IO_URI_URI_ROOTS_H_
#define QUANTD_WORKER_IO_URI_URI_ROOTS_H_

#include <string>
#include <vector>

#include "worker/common/status.h"
#include "worker/io/uri/uri_parser.h"

namespace quantd::io {

// The placeholder segment of a per-tenant root.
inline constexpr char kTenantPlaceholder[] = "{tenant}";

// True for a tenant name that can stand for a {tenant} path segment: 1 to
// 128 characters of [A-Za-z0-9._-], not starting with '.'.
bool IsSafeTenantSegment(const std::string& tenant);

// Where an output directory goes: `path` = `base` + "/" + `relative`.
// `base` is the trusted directory (a root as configured or as resolved, the
// fixed part of a per-tenant root before {tenant}, or the artifacts
// directory); `relative` (never empty, no '.'/'..') is walked below it
// without following symlinks.
struct OutputLocation {
  std::string scheme = "file";  // or "s3": then base and path are key prefixes of `bucket`
  std::string bucket;
  std::string path;
  std::string base;
  std::string relative;
};

class UriRoots {
 public:
  // `roots`: the operator's roots (see above). `artifacts_dir`: absolute
  // <data-dir>/artifacts (outputs are always allowed below it; empty: no
  // such default). `flag`: the flag that configures the roots, named in
  // messages ("--allowed-uri-roots"). INVALID_ARGUMENT (INVALID_URI_ROOT)
  // for a malformed root, a file root whose fixed part does not exist, or a
  // {tenant} that is not a whole path segment.
  static StatusOr<UriRoots> Create(const std::vector<std::string>& roots,
                                   const std::string& artifacts_dir, const std::string& flag);

  // An input URI of a job of `tenant`: OK, or the parser's error, or
  // PERMISSION_DENIED (URI_NOT_ALLOWED).
  Status CheckInput(const std::string& uri, const std::string& tenant) const;

  // An output URI of a job of `tenant`: where it goes, or the parser's
  // error, or PERMISSION_DENIED (URI_NOT_ALLOWED).
  StatusOr<OutputLocation> CheckOutput(const std::string& uri, const std::string& tenant) const;

  // The local directories a job of `tenant` may read (file roots, per-tenant
  // ones substituted), resolved with realpath where they exist.
  std::vector<std::string> InputDirectories(const std::string& tenant) const;

  // For the startup logs of quantd and quantd-worker.
  const std::vector<std::string>& roots() const { return specs_; }
  std::vector<std::string> InputRoots() const;   // every root, as configured
  std::vector<std::string> OutputRoots() const;  // file and s3 roots, then artifacts_dir + "/"
  std::vector<std::string> TenantRoots() const;  // the roots with {tenant}
  const std::string& artifacts_dir() const { return artifacts_dir_; }

 private:
  struct Root {
    std::string spec;    // as configured
    std::string scheme;  // file, http, https, hf, s3
    std::string host;    // http(s): host[:port]; hf: ORG; s3: bucket; file: empty
    std::string hub_type;  // hf: "model" or "dataset"
    // file: the root path as configured (normalised) and as resolved; for a
    // per-tenant root only the part before the first {tenant}, and `suffix`
    // is the rest ("/{tenant}/out"). http(s), hf: the decoded path prefix.
    std::string path;
    std::string resolved;
    std::string suffix;
    bool per_tenant = false;
  };
  // The root's path for `tenant` (per-tenant roots substituted), both forms;
  // false when the root does not apply to this tenant.
  static bool PathsFor(const Root& root, const std::string& tenant, std::string* configured,
                       std::string* resolved);
  StatusOr<OutputLocation> CheckS3Output(const ParsedUri& p, const std::string& uri,
                                         const std::string& tenant) const;
  std::string NotAllowed(const std::string& uri, const std::string& tenant,
                         const std::string& what) const;

  std::vector<Root> roots_;
  std::vector<std::string> specs_;
  std::string artifacts_dir_;
  std::string artifacts_resolved_;
  std::string flag_;
};

// realpath of the longest existing prefix of the absolute `path`, followed
// by the components that do not exist (yet).
std::string ResolveExistingPrefix(const std::string& path);

// The existing part of an output location, walked from its base without
// following symlinks and without changing anything: PERMISSION_DENIED
// (URI_NOT_ALLOWED) when a component is a symbolic link, FAILED_PRECONDITION
// when one above the last is not a directory. What the worker does for real
// when it writes (worker/export/artifact.h), so the frontend refuses early
// what the worker would refuse.
Status CheckOutputWalk(const OutputLocation& location);

}  // namespace quantd::io

#endif  // QUANTD_WORKER_IO_URI_URI_ROOTS_H_
