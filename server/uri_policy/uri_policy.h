// Which model, dataset and output URIs a job may name. With allowed roots
// configured (--allowed-uri-roots), every URI in a job spec must lie under
// one of them; anything else is PERMISSION_DENIED (reason URI_NOT_ALLOWED):
// other schemes, "." or ".." segments, file:// paths that leave a root
// through a symlink (paths are resolved with realpath, including the
// existing part of a path that does not exist yet), and URLs with
// credentials in them. Torch-free and independent of the engine's URI
// resolver, which applies its own size and time limits when it reads.
#ifndef QUANTD_SERVER_URI_POLICY_URI_POLICY_H_
#define QUANTD_SERVER_URI_POLICY_URI_POLICY_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "quantd/v1/job.pb.h"

namespace quantd::server {

class UriPolicy {
 public:
  // `roots`: URI prefixes such as "file:///srv/models" or
  // "https://huggingface.co/org/". file:// roots must exist (they are
  // resolved once, here). INVALID_ARGUMENT for a malformed root.
  static absl::StatusOr<UriPolicy> Create(const std::vector<std::string>& roots);

  // Checks spec.model_uri, spec.calibration.dataset_uri,
  // spec.evaluation.dataset_uri and spec.export.output_uri (empty ones are
  // not checked: their defaults are quantd's own).
  absl::Status CheckSpec(const v1::JobSpec& spec) const;

  // One URI, for the field named `field`.
  absl::Status CheckUri(absl::string_view field, absl::string_view uri) const;

  // The roots as configured, for messages and docs.
  const std::vector<std::string>& roots() const { return display_roots_; }

 private:
  struct Root {
    std::string scheme;     // "file", "https", ...
    std::string authority;  // host[:port]; empty for file
    std::string path;       // resolved for file; always starts with '/'
  };
  std::vector<Root> roots_;
  std::vector<std::string> display_roots_;
};

}  // namespace quantd::server

#endif  // QUANTD_SERVER_URI_POLICY_URI_POLICY_H_
