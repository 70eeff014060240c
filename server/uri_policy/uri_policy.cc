#include "server/uri_policy/uri_policy.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/common/errors.h"
#include "worker/common/status.h"

namespace quantd::server {
namespace {

// The engine's status for `field`, with the field named in the message and
// in a BadRequest violation.
quantd::Status ForField(absl::string_view field, const quantd::Status& status) {
  if (status.ok()) return quantd::OkStatus();
  quantd::Status named(status.code(), absl::StrCat(field, ": ", status.message()));
  SetReason(named, status.reason().empty() ? "URI_NOT_ALLOWED" : status.reason());
  AddViolations(named, {{std::string(field), status.message()}});
  return named;
}

}  // namespace

quantd::StatusOr<UriPolicy> UriPolicy::Create(const std::vector<std::string>& roots,
                                              const std::string& data_dir) {
  QD_ASSIGN_OR_RETURN(
      io::UriRoots parsed,
      io::UriRoots::Create(roots, data_dir + "/artifacts", "--allowed-uri-roots"));
  return UriPolicy(std::move(parsed));
}

quantd::Status UriPolicy::CheckInput(absl::string_view field, const std::string& uri,
                                     const std::string& tenant) const {
  return ForField(field, roots_.CheckInput(uri, tenant));
}

quantd::Status UriPolicy::CheckOutput(absl::string_view field, const std::string& uri,
                                      const std::string& tenant) const {
  auto location = roots_.CheckOutput(uri, tenant);
  if (!location.ok()) return ForField(field, location.status());
  // What the worker would refuse when it walks there (a symlinked parent),
  // refused now rather than after the job ran.
  return ForField(field, io::CheckOutputWalk(*location));
}

quantd::Status UriPolicy::CheckSpec(const v1::JobSpec& spec, const std::string& tenant) const {
  const std::pair<const char*, const std::string*> inputs[] = {
      {"spec.model_uri", &spec.model_uri()},
      {"spec.calibration.dataset_uri", &spec.calibration().dataset_uri()},
      {"spec.evaluation.dataset_uri", &spec.evaluation().dataset_uri()},
      {"spec.qat.dataset_uri", &spec.qat().dataset_uri()},
  };
  std::vector<quantd::Status> problems;
  for (const auto& [field, uri] : inputs) {
    if (uri->empty()) continue;
    quantd::Status s = CheckInput(field, *uri, tenant);
    if (!s.ok()) problems.push_back(std::move(s));
  }
  if (!spec.export_().output_uri().empty()) {
    quantd::Status s = CheckOutput("spec.export.output_uri", spec.export_().output_uri(), tenant);
    if (!s.ok()) problems.push_back(std::move(s));
  }
  if (problems.empty()) return quantd::OkStatus();
  // Refusals first: a URI outside the roots is PERMISSION_DENIED whatever
  // else is wrong; otherwise the malformed ones, then the rest.
  for (quantd::StatusCode code :
       {quantd::StatusCode::kPermissionDenied, quantd::StatusCode::kInvalidArgument}) {
    std::vector<FieldViolation> violations;
    std::vector<std::string> messages;
    std::string reason;
    for (const quantd::Status& p : problems) {
      if (p.code() != code) continue;
      for (const FieldViolation& v : p.violations()) violations.push_back(v);
      messages.emplace_back(p.message());
      if (reason.empty()) reason = p.reason();
    }
    if (violations.empty()) continue;
    quantd::Status out = MakeError(code, reason, absl::StrJoin(messages, "; "));
    AddViolations(out, violations);
    return out;
  }
  return problems.front();
}

}  // namespace quantd::server
