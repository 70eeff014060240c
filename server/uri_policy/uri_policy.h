// Which model, dataset and output URIs a job may name: the frontend's side
// of the roots policy (worker/io/uri/uri_roots.h), which quantd-worker
// enforces again with the same parser and the same matching, so the two
// agree on every URI.
//
// - Inputs (spec.model_uri, spec.calibration.dataset_uri,
//   spec.evaluation.dataset_uri) must lie under one of the roots
//   (--allowed-uri-roots); with none configured every input is refused.
// - An output (spec.export.output_uri) must be a file:// directory strictly
//   below a file root or below <data-dir>/artifacts/, the default location,
//   and no existing component below that may be a symlink.
// - A root may hold the segment {tenant}: it applies to the job's tenant only.
//
// A refused URI is PERMISSION_DENIED (reason URI_NOT_ALLOWED); a malformed
// one (a query or fragment in a file:// URI, an encoded '/', a NUL, another
// host) is INVALID_ARGUMENT (reason INVALID_URI). Either way every bad field
// is named in a BadRequest.
#ifndef QUANTD_SERVER_URI_POLICY_URI_POLICY_H_
#define QUANTD_SERVER_URI_POLICY_URI_POLICY_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "quantd/v1/job.pb.h"
#include "worker/common/status.h"
#include "worker/io/uri/uri_roots.h"

namespace quantd::server {

class UriPolicy {
 public:
  // `roots`: URI prefixes such as "file:///srv/models", "/srv/out/{tenant}"
  // or "https://huggingface.co/org/"; file roots must exist (the part before
  // {tenant}, for a per-tenant root). `data_dir`: quantd's absolute data
  // directory. INVALID_ARGUMENT (INVALID_URI_ROOT) for a bad root.
  static quantd::StatusOr<UriPolicy> Create(const std::vector<std::string>& roots,
                                            const std::string& data_dir);

  // Checks every URI of a job of `tenant` (empty ones are not checked: their
  // defaults are quantd's own).
  quantd::Status CheckSpec(const v1::JobSpec& spec, const std::string& tenant) const;

  // One input or output URI, for the field named `field`.
  quantd::Status CheckInput(absl::string_view field, const std::string& uri,
                            const std::string& tenant) const;
  quantd::Status CheckOutput(absl::string_view field, const std::string& uri,
                             const std::string& tenant) const;

  // The roots as configured (what local workers get as --allowed-roots).
  const std::vector<std::string>& roots() const { return roots_.roots(); }
  const io::UriRoots& uri_roots() const { return roots_; }

 private:
  explicit UriPolicy(io::UriRoots roots) : roots_(std::move(roots)) {}
  io::UriRoots roots_;
};

}  // namespace quantd::server

#endif  // QUANTD_SERVER_URI_POLICY_URI_POLICY_H_
